"""The MSMs' GLV split, on G1 and on G2: k = k1 + k2 lambda with short halves, and MSMs that
agree with double-and-add for any 256-bit scalar."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, CurveParams, g1_to_mont, g2_to_mont
from engine.prover.params.glv_params import GROUPS, glv_params
from engine.prover.params.pairing_params import g1_mul, g2_mul

CURVE_NAMES = sorted(CURVES)
CASES = [(curve, group) for curve in CURVE_NAMES for group in GROUPS]
# the edges as well as the bulk: 0, 1, r - 1, lambda, 2^256 - 1
scalars_256 = st.one_of(st.integers(0, 2**256 - 1), st.sampled_from([0, 1, 2**256 - 1, 2**255]))


def limbs(k: int) -> np.ndarray:
    return np.array([[(k >> (64 * i)) & (2**64 - 1) for i in range(4)]], dtype=np.uint64)


def point(c: CurveParams, group: str, k: int) -> Any:
    return g1_mul(c, c.g1, k) if group == "g1" else g2_mul(c, c.g2, k)


def phi(c: CurveParams, group: str, p: Any) -> Any:
    """(beta x, y): beta scales both coefficients of a G2 x."""
    beta = glv_params(c.name, group).beta
    if group == "g1":
        return (beta * p[0] % c.p, p[1])
    return ((beta * p[0][0] % c.p, beta * p[0][1] % c.p), p[1])


def neg(c: CurveParams, group: str, p: Any) -> Any:
    return (p[0], -p[1] % c.p) if group == "g1" else (p[0], (-p[1][0] % c.p, -p[1][1] % c.p))


def to_mont(c: CurveParams, group: str, points: list[Any]) -> np.ndarray:
    return g1_to_mont(points, c) if group == "g1" else g2_to_mont(points, c)


def msm(group: str) -> Any:
    return native.msm_g1 if group == "g1" else native.msm_g2


def scalar_mul(group: str) -> Any:
    return native.g1_scalar_mul if group == "g1" else native.g2_scalar_mul


@pytest.mark.parametrize(("curve", "group"), CASES)
def test_phi_multiplies_the_group_by_its_lambda(curve: str, group: str) -> None:
    c, gp = CURVES[curve], glv_params(curve, group)
    p = point(c, group, 12345)
    assert point(c, group, 12345 * gp.lam) == phi(c, group, p)


def test_g1_and_g2_take_the_two_different_cube_roots() -> None:
    # derived, not assumed: a split with G1's lambda would be wrong on G2
    for curve in CURVE_NAMES:
        g1, g2 = glv_params(curve, "g1"), glv_params(curve, "g2")
        assert g1.beta == g2.beta and g1.lam * g1.lam % CURVES[curve].r == g2.lam


@pytest.mark.parametrize(("curve", "group"), CASES)
@settings(max_examples=200, deadline=None)
@given(k=scalars_256)
def test_the_split_is_congruent_and_short(curve: str, group: str, k: int) -> None:
    c, gp = CURVES[curve], glv_params(curve, group)
    k1, k2 = gp.split(k)
    assert (k1 + k2 * gp.lam - k) % c.r == 0
    assert abs(k1) < 2**gp.bits and abs(k2) < 2**gp.bits <= 2**129


@pytest.mark.parametrize(("curve", "group"), CASES)
@settings(max_examples=25, deadline=None)
@given(k=st.one_of(scalars_256, st.sampled_from(["r-1", "lambda", "r+lambda"])))
def test_a_one_point_msm_is_double_and_add_for_any_scalar(curve: str, group: str, k: int | str) -> None:
    c, gp = CURVES[curve], glv_params(curve, group)
    k = {"r-1": c.r - 1, "lambda": gp.lam, "r+lambda": c.r + gp.lam}[k] if isinstance(k, str) else k
    base = to_mont(c, group, [point(c, group, 7)])
    expect = scalar_mul(group)(curve, base[0], k % c.r)
    assert np.array_equal(msm(group)(curve, base, limbs(k)), expect)


@pytest.mark.parametrize(("curve", "group"), CASES)
def test_an_msm_whose_points_include_fixed_points_of_phi_and_their_negatives(curve: str, group: str) -> None:
    # P and -P, phi(P) and P with scalars that cancel: the split's signs and the batch's
    # doubling and cancellation cases all meet in one window
    c, gp = CURVES[curve], glv_params(curve, group)
    p = point(c, group, 99)
    bases = to_mont(c, group, [p, neg(c, group, p), phi(c, group, p), p, p])
    ks = [5, 5, 1, c.r - gp.lam, 2**200]
    expect = scalar_mul(group)(curve, bases[0], 2**200 % c.r)
    assert np.array_equal(msm(group)(curve, bases, np.concatenate([limbs(k) for k in ks])), expect)
