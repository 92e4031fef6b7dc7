"""Bindings of the native optimal ate pairings of both curves and the subgroup checks
(kernels/pairing.h), for the tests that hold them to py_ecc and arkworks. The prover's own
verifier calls the kernels directly (engine.prover.backends.cpu.groth16_native); nothing shipped uses these.

Everything curve-specific the kernels need is derived in engine.prover.params.pairing_params.
Points are Python ints, affine, None for infinity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.prover.backends.cpu.native import build
from engine.prover.backends.cpu.native import pointer as native_ptr
from engine.prover.params.curves import CurveParams, G1Affine, G2Affine, g1_to_mont, g2_to_mont, get_curve
from engine.prover.params.pairing_params import PAIRING_PARAMS as PAIRING_PARAMS  # re-exported
from engine.prover.params.pairing_params import Fp12Ints, hard_part_poly


class PointError(ValueError):
    """A point is not a point of the group; reason: "not reduced", "off curve" or "not in subgroup"."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what, self.reason = what, reason


def _g1_arr(points: Sequence[G1Affine | None], c: CurveParams) -> np.ndarray:
    return np.ascontiguousarray(g1_to_mont(list(points), c)) if points else np.zeros((0, 2 * c.fp_limbs), np.uint64)


def _g2_arr(points: Sequence[G2Affine | None], c: CurveParams) -> np.ndarray:
    return np.ascontiguousarray(g2_to_mont(list(points), c)) if points else np.zeros((0, 4 * c.fp_limbs), np.uint64)


def _check_reduced(values: Sequence[int], c: CurveParams, what: str) -> None:
    for v in values:
        if not 0 <= v < c.p:
            raise PointError(what, "not reduced")


def _ptr(a: np.ndarray) -> Any:
    """A pointer that keeps ``a`` alive while it lives (see engine.prover.backends.cpu.native.pointer)."""
    return native_ptr(a)


_REASONS = {1: "off curve", 2: "not in subgroup"}


def check_g1(curve: str, pt: G1Affine | None, what: str = "G1 point") -> None:
    """Raises PointError unless pt is infinity or a point of the order-r subgroup of G1."""
    c = get_curve(curve)
    if pt is None:
        return
    _check_reduced(pt, c, what)
    _, lib = build()
    code = getattr(lib, f"{c.name}_g1_check")(_ptr(_g1_arr([pt], c)))
    if code:
        raise PointError(what, _REASONS[code])


def check_g2(curve: str, pt: G2Affine | None, what: str = "G2 point") -> None:
    """Raises PointError unless pt is infinity or a point of the order-r subgroup of G2."""
    c = get_curve(curve)
    if pt is None:
        return
    _check_reduced((*pt[0], *pt[1]), c, what)
    _, lib = build()
    code = getattr(lib, f"{c.name}_g2_check")(_ptr(_g2_arr([pt], c)))
    if code:
        raise PointError(what, _REASONS[code])


Pairs = Sequence[tuple[G1Affine | None, G2Affine | None]]


def miller_loop(curve: str, pairs: Pairs) -> bytes:
    """The product of the pairs' Miller loops (opaque: raw Fp12 limbs), a factor that
    pairing_check takes back, e.g. a verifying key's e(alpha, beta) computed once."""
    c = get_curve(curve)
    out = np.zeros(12 * c.fp_limbs, dtype=np.uint64)
    g1, g2 = _g1_arr([p for p, _ in pairs], c), _g2_arr([q for _, q in pairs], c)
    _, lib = build()
    getattr(lib, f"{c.name}_miller_loop_api")(_ptr(out), _ptr(g1), _ptr(g2), len(pairs))
    return out.tobytes()


def pairing_check(curve: str, pairs: Pairs, *, factor: bytes | None = None) -> bool:
    """True iff prod e(P_i, Q_i) = 1 (times the pairs a miller_loop factor stands for): one
    product of Miller loops, one final exponentiation.

    The points are not validated here (check_g1/check_g2 do that): a pairing of points
    outside the subgroups has no meaning.
    """
    c = get_curve(curve)
    g1 = _g1_arr([p for p, _ in pairs], c)
    g2 = _g2_arr([q for _, q in pairs], c)
    ffi, lib = build()
    fac = ffi.NULL
    if factor is not None:
        fac_arr = np.frombuffer(factor, dtype=np.uint64).copy()
        if fac_arr.shape != (12 * c.fp_limbs,):
            raise ValueError("factor: not a miller_loop result of this curve")
        fac = _ptr(fac_arr)
    return bool(getattr(lib, f"{c.name}_pairing_check")(_ptr(g1), _ptr(g2), len(pairs), fac))


def _fp12_call(kernel: str, curve: str, p: G1Affine | None, q: G2Affine | None) -> Fp12Ints:
    c = get_curve(curve)
    out = np.zeros(12 * c.fp_limbs, dtype=np.uint64)
    _, lib = build()
    getattr(lib, f"{c.name}_{kernel}")(_ptr(out), _ptr(_g1_arr([p], c)), _ptr(_g2_arr([q], c)))
    raw = out.tobytes()
    n = 8 * c.fp_limbs
    return tuple(int.from_bytes(raw[i * n : (i + 1) * n], "little") for i in range(12))


def pairing(curve: str, p: G1Affine | None, q: G2Affine | None) -> Fp12Ints:
    """e(P, Q) as 12 ints: the Fp2 coefficients (c0, c1) of w^0 .. w^5, where w^6 = xi.

    This is the reduced optimal ate pairing, the value arkworks computes and, mapped to its
    Fp[w] basis, py_ecc's for BN254 (py_ecc's BLS12-381 pairing is its inverse: py_ecc
    ignores the sign of u).
    """
    return _fp12_call("pairing", curve, p, q)


def pairing_power(curve: str, p: G1Affine | None, q: G2Affine | None) -> tuple[int, Fp12Ints]:
    """(m, e(P, Q)^m) through the faster final exponentiation pairing_check uses (for tests)."""
    return hard_part_poly(get_curve(curve).name)[0], _fp12_call("pairing_power", curve, p, q)
