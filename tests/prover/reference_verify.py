"""Groth16 verification with independent pairing libraries: the reference the native
verifier (engine.prover.verify) is tested and benchmarked against.

BLS12-381: py_arkworks_bls12381 (arkworks; deserialisation checks on-curve and subgroup).
BN254: py_ecc's optimized_bn128 (pure Python, 1-1.5 s a verification; the Miller loop of
e(alpha, beta) is cached per key). Both check e(-A, B) e(alpha, beta) e(L, gamma) e(C, delta) = 1
with L = IC_0 + sum x_i IC_i, and raise InvalidProof for points off the curve or subgroup.
Public inputs are taken as already checked (engine.prover.verify does that).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from engine.prover.datatypes import Proof
from engine.prover.keys import VerifyingKey
from engine.prover.params.curves import G1Affine, G2Affine, get_curve
from engine.prover.verify import InvalidProof


def _check_coords(vals: Sequence[int], p: int, what: str) -> None:
    for v in vals:
        if not 0 <= v < p:
            raise InvalidProof(f"{what}: coordinate not reduced modulo the base field")


# ---------------------------------------------------------------------------------------------
# BLS12-381 (arkworks)


def _ark_g1(pt: G1Affine | None, what: str) -> Any:
    import py_arkworks_bls12381 as ark

    if pt is None:
        return ark.G1Point.identity()
    _check_coords(pt, get_curve("bls12381").p, what)
    try:
        return ark.G1Point.from_xy_bytes_le(pt[0].to_bytes(48, "little") + pt[1].to_bytes(48, "little"))
    except Exception as e:  # arkworks reports off-curve / not-in-subgroup as a ValueError-like error
        raise InvalidProof(f"{what}: not a point of the G1 subgroup ({e})") from None


def _ark_g2(pt: G2Affine | None, what: str) -> Any:
    import py_arkworks_bls12381 as ark

    if pt is None:
        return ark.G2Point.identity()
    (x0, x1), (y0, y1) = pt
    _check_coords((x0, x1, y0, y1), get_curve("bls12381").p, what)
    try:
        return ark.G2Point.from_xy_bytes_le(b"".join(v.to_bytes(48, "little") for v in (x0, x1, y0, y1)))
    except Exception as e:
        raise InvalidProof(f"{what}: not a point of the G2 subgroup ({e})") from None


def _verify_bls(vk: VerifyingKey, proof: Proof, pub: list[int]) -> bool:
    import py_arkworks_bls12381 as ark

    a, b, c = _ark_g1(proof.pi_a, "pi_a"), _ark_g2(proof.pi_b, "pi_b"), _ark_g1(proof.pi_c, "pi_c")
    ic = [_ark_g1(p, f"verification key IC[{i}]") for i, p in enumerate(vk.ic)]
    acc = ic[0]
    for x, p in zip(pub, ic[1:], strict=True):
        acc = acc + p * ark.Scalar.from_le_bytes(x.to_bytes(32, "little"))
    alpha = _ark_g1(vk.alpha1, "vk alpha1")
    g2s = [_ark_g2(vk.beta2, "vk beta2"), _ark_g2(vk.gamma2, "vk gamma2"), _ark_g2(vk.delta2, "vk delta2")]
    # e(-A, B) · e(alpha, beta) · e(L, gamma) · e(C, delta) == 1
    return bool(ark.GT.pairing_check([-a, alpha, acc, c], [b, *g2s]))


# ---------------------------------------------------------------------------------------------
# BN254 (py_ecc)


def _bn_g1(pt: G1Affine | None, what: str) -> Any:
    from py_ecc.optimized_bn128 import FQ, Z1, b, is_on_curve

    if pt is None:
        return Z1
    _check_coords(pt, get_curve("bn128").p, what)
    P = (FQ(pt[0]), FQ(pt[1]), FQ.one())
    if not is_on_curve(P, b):
        raise InvalidProof(f"{what}: not on the BN254 G1 curve")
    return P  # G1 has cofactor 1: on the curve means in the group


def _bn_g2(pt: G2Affine | None, what: str, *, subgroup: bool = True) -> Any:
    from py_ecc.optimized_bn128 import FQ2, Z2, b2, curve_order, is_inf, is_on_curve, multiply

    if pt is None:
        return Z2
    (x0, x1), (y0, y1) = pt
    _check_coords((x0, x1, y0, y1), get_curve("bn128").p, what)
    Q = (FQ2([x0, x1]), FQ2([y0, y1]), FQ2.one())
    if not is_on_curve(Q, b2):
        raise InvalidProof(f"{what}: not on the BN254 G2 twist")
    if subgroup and not is_inf(multiply(Q, curve_order)):
        raise InvalidProof(f"{what}: not in the BN254 G2 subgroup")
    return Q


@functools.lru_cache(maxsize=64)
def _bn_alpha_beta_miller(alpha: G1Affine, beta: G2Affine) -> Any:
    from py_ecc.optimized_bn128 import pairing

    return pairing(_bn_g2(beta, "vk beta2"), _bn_g1(alpha, "vk alpha1"), final_exponentiate=False)


def _verify_bn(vk: VerifyingKey, proof: Proof, pub: list[int]) -> bool:
    from py_ecc.optimized_bn128 import FQ12, add, final_exponentiate, is_inf, multiply, neg, pairing

    a, b, c = _bn_g1(proof.pi_a, "pi_a"), _bn_g2(proof.pi_b, "pi_b"), _bn_g1(proof.pi_c, "pi_c")
    ic = [_bn_g1(p, f"verification key IC[{i}]") for i, p in enumerate(vk.ic)]
    acc = ic[0]
    for x, p in zip(pub, ic[1:], strict=True):
        if x:
            acc = add(acc, multiply(p, x))
    gamma, delta = _bn_g2(vk.gamma2, "vk gamma2"), _bn_g2(vk.delta2, "vk delta2")
    f = _bn_alpha_beta_miller(vk.alpha1, vk.beta2)
    # py_ecc's miller loop returns 1 for an infinity argument; skip those factors
    for g1, g2 in ((neg(a), b), (acc, gamma), (c, delta)):
        if not (is_inf(g1) or is_inf(g2)):
            f = f * pairing(g2, g1, final_exponentiate=False)
    return final_exponentiate(f) == FQ12.one()


def reference_verify(vk: VerifyingKey, proof: Proof, public_inputs: Sequence[int]) -> bool:
    """True iff the proof verifies, computed with arkworks (BLS12-381) or py_ecc (BN254)."""
    pub = [int(v) for v in public_inputs]
    return _verify_bls(vk, proof, pub) if vk.curve == "bls12381" else _verify_bn(vk, proof, pub)
