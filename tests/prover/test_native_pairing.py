"""The native pairings (kernels/pairing.h, bound by tests/prover/pairing_bindings.py) against
py_ecc and py_arkworks_bls12381, and the native Groth16 verifier against snarkjs-verified
proofs, both curves."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, CurveParams, g1_from_mont, g1_to_mont, g2_from_mont, g2_to_mont
from engine.prover.snarkjs import read_proof_json, read_public_json, read_vk_json
from engine.prover.verify import verify
from tests.prover.pairing_bindings import (
    PAIRING_PARAMS,
    PointError,
    check_g1,
    check_g2,
    miller_loop,
    pairing,
    pairing_check,
    pairing_power,
)
from tests.prover.reference_verify import reference_verify

CURVE_NAMES = sorted(CURVES)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
ONE = (1,) + (0,) * 11
# nonzero modulo both group orders (BN254's r is the smaller), so products never vanish
scalars = st.integers(min_value=1, max_value=CURVES["bn128"].r - 1)


def g1(curve: str, k: int) -> Any:
    c = CURVES[curve]
    return g1_from_mont(native.g1_scalar_mul(curve, g1_to_mont([c.g1], c)[0], k).reshape(1, -1), c)[0]


def g2(curve: str, k: int) -> Any:
    c = CURVES[curve]
    return g2_from_mont(native.g2_scalar_mul(curve, g2_to_mont([c.g2], c)[0], k).reshape(1, -1), c)[0]


def neg1(curve: str, pt: Any) -> Any:
    return (pt[0], (-pt[1]) % CURVES[curve].p)


def to_py_ecc(c: CurveParams, e: tuple[int, ...]) -> list[int]:
    """Our Fp2 coefficients of w^k (w^6 = xi0 + u) as py_ecc's Fp[w] coefficients (u = w^6 - xi0)."""
    xi0 = PAIRING_PARAMS[c.name].xi0
    co = [0] * 12
    for k in range(6):
        a, b = e[2 * k], e[2 * k + 1]
        co[k] = (co[k] + a - xi0 * b) % c.p
        co[k + 6] = (co[k + 6] + b) % c.p
    return co


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=10, deadline=None)
@given(a=scalars, b=scalars)
def test_pairing_is_bilinear(curve: str, a: int, b: int) -> None:
    e = pairing(curve, g1(curve, a), g2(curve, b))
    assert e == pairing(curve, g1(curve, a * b), g2(curve, 1)) == pairing(curve, g1(curve, 1), g2(curve, a * b))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=10, deadline=None)
@given(a=scalars, b=scalars)
def test_pairing_check_accepts_exactly_the_balanced_products(curve: str, a: int, b: int) -> None:
    # e(aP, bQ) e(-abP, Q) = 1, and not with ab + 1 (which is no point when ab = -1)
    assume((a * b + 1) % CURVES[curve].r != 0)
    assert pairing_check(curve, [(g1(curve, a), g2(curve, b)), (neg1(curve, g1(curve, a * b)), g2(curve, 1))])
    assert not pairing_check(curve, [(g1(curve, a), g2(curve, b)), (neg1(curve, g1(curve, a * b + 1)), g2(curve, 1))])


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=5, deadline=None)
@given(a=scalars, b=scalars)
def test_a_precomputed_miller_loop_stands_for_its_pairs(curve: str, a: int, b: int) -> None:
    ab = miller_loop(curve, [(g1(curve, a), g2(curve, b))])
    assert pairing_check(curve, [(neg1(curve, g1(curve, a * b)), g2(curve, 1))], factor=ab)
    assert not pairing_check(curve, [(neg1(curve, g1(curve, a * b + 1)), g2(curve, 1))], factor=ab)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_pairing_of_the_generators_is_not_one(curve: str) -> None:
    c = CURVES[curve]
    assert pairing(curve, c.g1, c.g2) != ONE
    assert not pairing_check(curve, [(c.g1, c.g2)])


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_pairing_with_infinity_is_one(curve: str) -> None:
    c = CURVES[curve]
    assert pairing(curve, None, c.g2) == ONE
    assert pairing(curve, c.g1, None) == ONE
    assert pairing_check(curve, [(None, c.g2), (c.g1, None)])
    assert pairing_check(curve, [])


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=3, deadline=None)
@given(a=scalars, b=scalars)
def test_pairing_equals_py_ecc(curve: str, a: int, b: int) -> None:
    c = CURVES[curve]
    m = importlib.import_module("py_ecc.optimized_bn128" if curve == "bn128" else "py_ecc.optimized_bls12_381")
    ref = m.pairing(m.multiply(m.G2, b), m.multiply(m.G1, a))
    if curve == "bls12381":
        # py_ecc's Miller loop runs over |u| and ignores u's sign: its value is the inverse
        ref = ref.inv()
    assert to_py_ecc(c, pairing(curve, g1(curve, a), g2(curve, b))) == [int(v) for v in ref.coeffs]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=5, deadline=None)
@given(a=scalars, b=scalars)
def test_the_checks_final_exponentiation_gives_a_fixed_power_of_the_pairing(curve: str, a: int, b: int) -> None:
    c = CURVES[curve]
    m = importlib.import_module("py_ecc.optimized_bn128" if curve == "bn128" else "py_ecc.optimized_bls12_381")
    P, Q = g1(curve, a), g2(curve, b)
    power, e_m = pairing_power(curve, P, Q)
    assert m.FQ12(to_py_ecc(c, e_m)) == m.FQ12(to_py_ecc(c, pairing(curve, P, Q))) ** power


@settings(max_examples=10, deadline=None)
@given(a=scalars, b=scalars, c=scalars, match=st.booleans())
def test_pairing_check_agrees_with_arkworks(a: int, b: int, c: int, match: bool) -> None:
    import py_arkworks_bls12381 as ark

    r = CURVES["bls12381"].r
    if match:
        c = a * b % r

    def sc(k: int) -> Any:
        return ark.Scalar.from_le_bytes((k % r).to_bytes(32, "little"))

    expected = ark.GT.pairing_check(
        [ark.G1Point() * sc(a), -(ark.G1Point() * sc(c))], [ark.G2Point() * sc(b), ark.G2Point()]
    )
    got = pairing_check(
        "bls12381", [(g1("bls12381", a), g2("bls12381", b)), (neg1("bls12381", g1("bls12381", c)), g2("bls12381", 1))]
    )
    assert got == bool(expected)


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=10, deadline=None)
@given(k=scalars)
def test_point_checks_accept_every_multiple_of_the_generators(curve: str, k: int) -> None:
    check_g1(curve, g1(curve, k))
    check_g2(curve, g2(curve, k))


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_point_checks_reject_points_off_the_curve(curve: str) -> None:
    c = CURVES[curve]
    check_g1(curve, c.g1)
    check_g2(curve, c.g2)
    with pytest.raises(PointError, match="off curve"):
        check_g1(curve, (c.g1[0], c.g1[1] + 1))
    with pytest.raises(PointError, match="off curve"):
        check_g2(curve, (c.g2[0], (c.g2[1][0], c.g2[1][1] + 1)))
    with pytest.raises(PointError, match="not reduced"):
        check_g1(curve, (c.g1[0] + c.p, c.g1[1]))


def _sqrt_fp(v: int, p: int) -> int | None:
    s = pow(v, (p + 1) // 4, p)  # p = 3 mod 4 on both curves
    return s if s * s % p == v % p else None


def _fp2_sqrt(a: tuple[int, int], p: int) -> tuple[int, int] | None:
    """sqrt in Fp[u]/(u^2 + 1) through the norm: x = sqrt((a0 + |a|)/2), y = a1 / 2x."""
    n = _sqrt_fp((a[0] * a[0] + a[1] * a[1]) % p, p)
    if n is None:
        return None
    for nn in (n, -n % p):
        x = _sqrt_fp((a[0] + nn) * pow(2, -1, p) % p, p)
        if x:
            return (x, a[1] * pow(2 * x, -1, p) % p)
    return None


def _point_outside_subgroup_g2(c: CurveParams) -> Any:
    p, (b0, b1) = c.p, c.b2
    for x0 in range(1, 100):
        # x^3 + b' with x = x0 (in Fp)
        rhs = ((x0**3 + b0) % p, b1 % p)
        y = _fp2_sqrt(rhs, p)
        if y is not None:
            return ((x0, 0), y)
    raise AssertionError("no point found")


def _point_outside_subgroup_g1(c: CurveParams) -> Any:
    for x in range(1, 100):
        y = _sqrt_fp((x**3 + c.b) % c.p, c.p)
        if y is not None:
            return (x, y)
    raise AssertionError("no point found")


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_g2_check_rejects_a_point_of_the_twist_outside_the_subgroup(curve: str) -> None:
    with pytest.raises(PointError, match="not in subgroup"):
        check_g2(curve, _point_outside_subgroup_g2(CURVES[curve]))


def test_g1_check_rejects_a_bls12381_point_outside_the_subgroup() -> None:
    with pytest.raises(PointError, match="not in subgroup"):
        check_g1("bls12381", _point_outside_subgroup_g1(CURVES["bls12381"]))


def _snarkjs(curve: str) -> tuple[Any, Any, list[int]]:
    d = FIXTURES / curve
    return (
        read_vk_json(d / "verification_key.json"),
        read_proof_json(d / "proof.json"),
        read_public_json(d / "public.json"),
    )


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_snarkjs_proof_verifies(curve: str) -> None:
    vk, proof, pub = _snarkjs(curve)
    assert verify(vk, proof, pub)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_tampered_snarkjs_proof_does_not_verify(curve: str) -> None:
    vk, proof, pub = _snarkjs(curve)
    assert not verify(vk, proof._replace(pi_c=proof.pi_a), pub)
    assert not verify(vk, proof, [pub[0], (pub[1] + 1) % CURVES[curve].r])


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_native_and_reference_verifiers_agree(curve: str) -> None:
    vk, proof, pub = _snarkjs(curve)
    bad = proof._replace(pi_a=proof.pi_c)
    assert [verify(vk, pr, pub) for pr in (proof, bad)] == [reference_verify(vk, pr, pub) for pr in (proof, bad)]
