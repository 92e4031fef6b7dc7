"""Groth16 verification with the native pairings, both curves: the kernels' verifier
(kernels/groth16.h through engine.prover.backends.cpu.groth16_native, which the command-line prover
runs too), with a key's checks and e(alpha, beta) cached here.

Checked: e(A, B) = e(alpha, beta) · e(L, gamma) · e(C, delta) with L = IC_0 + sum x_i IC_i, as
snarkjs's groth16 verify does, written as the one multi-pairing
e(-A, B) · e(alpha, beta) · e(L, gamma) · e(C, delta) = 1 (four Miller loops sharing their
squarings, one final exponentiation; e(alpha, beta)'s Miller loop is computed once per key).
Every point is checked to be on its curve and in the
order-r subgroup; a key's points once per key (cached), the proof's every time.

verify() returns False for a well-formed proof that does not verify and raises InvalidProof
(a ValueError with the reason) for inputs that are malformed: points off the curve or outside
the subgroup, coordinates not reduced, public inputs >= r, the wrong number of them, a proof
for another curve. tests/prover/reference_verify.py keeps the py_ecc / arkworks verifier this
one is tested against.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.prover.backends.cpu import groth16_native
from engine.prover.datatypes import InvalidProof, Proof, VerifyingKey
from engine.prover.params.curves import G1Affine, G2Affine, fr_to_limbs, g1_to_mont, g2_to_mont, get_curve

log = logging.getLogger(__name__)


def _check_public(vk: VerifyingKey, public_inputs: Sequence[int]) -> list[int]:
    r = get_curve(vk.curve).r
    vals = [int(v) for v in public_inputs]
    if len(vals) != vk.n_public:
        raise InvalidProof(f"expected {vk.n_public} public inputs, got {len(vals)}")
    for i, v in enumerate(vals):
        if not 0 <= v < r:
            raise InvalidProof(f"public input {i} is not a field element (must be 0 <= x < r)")
    return vals


def _reduced(curve: str, what: str, *coordinates: int) -> None:
    """Coordinates must be below p: the conversion to the kernels' layout would reduce them."""
    p = get_curve(curve).p
    if not all(0 <= v < p for v in coordinates):
        raise InvalidProof(f"{what}: coordinate not reduced modulo the base field")


def _g1(curve: str, pt: G1Affine | None, what: str) -> np.ndarray:
    if pt is not None:
        _reduced(curve, what, *pt)
    return g1_to_mont([pt], curve)[0]


def _g2(curve: str, pt: G2Affine | None, what: str) -> np.ndarray:
    if pt is not None:
        _reduced(curve, what, *pt[0], *pt[1])
    return g2_to_mont([pt], curve)[0]


@dataclass(frozen=True)
class _Key:
    """A verifying key in the kernels' layout, its points checked, and e(alpha, beta)'s Miller loop."""

    gamma2: np.ndarray
    delta2: np.ndarray
    ic: np.ndarray
    alpha_beta: bytes


@functools.lru_cache(maxsize=64)
def _key(curve: str, alpha1: G1Affine, beta2: G2Affine, gamma2: G2Affine, delta2: G2Affine,
         ic: tuple[G1Affine | None, ...]) -> _Key:
    """Raises InvalidProof for a malformed key; cached, so a reused key is checked once."""
    c = get_curve(curve)
    a1, b2 = _g1(curve, alpha1, "vk alpha1"), _g2(curve, beta2, "vk beta2")
    g2, d2 = _g2(curve, gamma2, "vk gamma2"), _g2(curve, delta2, "vk delta2")
    for i, pt in enumerate(ic):
        if pt is not None:
            _reduced(curve, f"verification key IC[{i}]", *pt)
    ic_arr = np.ascontiguousarray(g1_to_mont(list(ic), c))
    groth16_native.check_key(c, a1, b2, g2, d2, ic_arr, len(ic))
    return _Key(gamma2=g2, delta2=d2, ic=ic_arr, alpha_beta=groth16_native.alpha_beta(c, a1, b2))


def _verify_native(vk: VerifyingKey, proof: Proof, pub: list[int]) -> bool:
    curve = vk.curve
    key = _key(curve, vk.alpha1, vk.beta2, vk.gamma2, vk.delta2, tuple(vk.ic))
    points = np.concatenate([_g1(curve, proof.pi_a, "pi_a"), _g2(curve, proof.pi_b, "pi_b"),
                             _g1(curve, proof.pi_c, "pi_c")])
    public = fr_to_limbs(pub) if pub else np.zeros((1, 4), np.uint64)
    return groth16_native.verify(get_curve(curve), points, key.gamma2, key.delta2, key.ic, public, len(pub),
                                 key.alpha_beta)


def verify(vk: VerifyingKey, proof: Proof, public_inputs: Sequence[int]) -> bool:
    """True iff the proof verifies. Raises InvalidProof for malformed input (see module doc)."""
    if proof.curve != vk.curve:
        raise InvalidProof(f"proof is over {proof.curve}, the verification key over {vk.curve}")
    pub = _check_public(vk, public_inputs)
    if len(vk.ic) != vk.n_public + 1:
        raise InvalidProof(f"verification key has {len(vk.ic)} IC points for {vk.n_public} public inputs")
    ok = _verify_native(vk, proof, pub)
    if not ok:
        log.info("groth16 proof over %s failed the pairing check", vk.curve)
    return ok


def check(vk: VerifyingKey, proof: Proof, public_inputs: Sequence[int]) -> None:
    """Like verify, but raises InvalidProof("pairing check failed ...") instead of returning False."""
    if not verify(vk, proof, public_inputs):
        raise InvalidProof("proof does not verify: pairing check failed (wrong proof, key or public inputs)")


def alphabeta_12(vk: VerifyingKey) -> list[list[list[int]]]:
    """e(alpha1, beta2) as snarkjs writes it, in its tower layout [c0, c1] of Fp6 [c0, c1, c2] of Fp2 [x, y].

    snarkjs's Fp12 = Fp6[w]/(w² − v), Fp6 = Fp2[v]/(v³ − ξ), so the Fp2 coefficient [i][j]
    multiplies w^(2j + i). py_ecc's Fp12 is Fp[w]/(w¹² − …) with w⁶ = ξ and u = w⁶ − ξ0
    (ξ = ξ0 + u: 9 + u for BN254, 1 + u for BLS12-381), so the Fp2 coefficient of w^k is
    (c_k + ξ0·c_{k+6}) + c_{k+6}·u.
    """
    # ffjavascript's final exponentiation computes a fixed power of the reduced pairing (its
    # hard part uses a multiple of (p⁴ − p² + 1)/r); matching it exactly, as checked against
    # `snarkjs zkey export verificationkey` on both curves, keeps our JSON byte-compatible
    coeffs, xi0 = (_alphabeta_bn128(vk), 9) if vk.curve == "bn128" else (_alphabeta_bls12_381(vk), 1)
    p = get_curve(vk.curve).p
    fp2 = [[(coeffs[k] + xi0 * coeffs[k + 6]) % p, coeffs[k + 6] % p] for k in range(6)]
    return [[fp2[2 * j + i] for j in range(3)] for i in range(2)]


def _alphabeta_bn128(vk: VerifyingKey) -> list[int]:
    """py_ecc's e(alpha1, beta2) on BN254, to ffjavascript's power: its Fp12 coefficients."""
    from py_ecc.optimized_bn128 import FQ, FQ2, pairing

    (bx0, bx1), (by0, by1) = vk.beta2
    e = pairing((FQ2([bx0, bx1]), FQ2([by0, by1]), FQ2.one()), (FQ(vk.alpha1[0]), FQ(vk.alpha1[1]), FQ.one()))
    x = 4965661367192848881  # the BN parameter
    e = e ** ((2 * x * (6 * x * x + 3 * x + 1)) % get_curve("bn128").r)
    return [int(v) for v in e.coeffs]


def _alphabeta_bls12_381(vk: VerifyingKey) -> list[int]:
    """py_ecc's e(alpha1, beta2) on BLS12-381, to ffjavascript's power: its Fp12 coefficients."""
    from py_ecc.optimized_bls12_381 import FQ, FQ2, pairing

    (bx0, bx1), (by0, by1) = vk.beta2
    e = pairing((FQ2([bx0, bx1]), FQ2([by0, by1]), FQ2.one()), (FQ(vk.alpha1[0]), FQ(vk.alpha1[1]), FQ.one()))
    e = (e * e * e).inv()
    return [int(v) for v in e.coeffs]
