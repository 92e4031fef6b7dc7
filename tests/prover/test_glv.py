"""The G1 MSM's GLV split: k = k1 + k2 lambda with short halves, and MSMs that agree with
double-and-add for any 256-bit scalar."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover import native
from engine.prover.curves import CURVES, g1_to_mont
from engine.prover.glv_params import glv_params
from engine.prover.pairing_params import g1_mul

CURVE_NAMES = sorted(CURVES)
# the edges as well as the bulk: 0, 1, r - 1, lambda, 2^256 - 1
scalars_256 = st.one_of(st.integers(0, 2**256 - 1), st.sampled_from([0, 1, 2**256 - 1, 2**255]))


def limbs(k: int) -> np.ndarray:
    return np.array([[(k >> (64 * i)) & (2**64 - 1) for i in range(4)]], dtype=np.uint64)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_phi_multiplies_g1_by_lambda(curve: str) -> None:
    c, gp = CURVES[curve], glv_params(curve)
    point = g1_mul(c, c.g1, 12345)
    assert point is not None
    assert g1_mul(c, point, gp.lam) == (gp.beta * point[0] % c.p, point[1])


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=200, deadline=None)
@given(k=scalars_256)
def test_the_split_is_congruent_and_short(curve: str, k: int) -> None:
    c, gp = CURVES[curve], glv_params(curve)
    k1, k2 = gp.split(k)
    assert (k1 + k2 * gp.lam - k) % c.r == 0
    assert abs(k1) < 2**gp.bits and abs(k2) < 2**gp.bits <= 2**129


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=25, deadline=None)
@given(k=st.one_of(scalars_256, st.sampled_from(["r-1", "lambda", "r+lambda"])))
def test_a_one_point_msm_is_double_and_add_for_any_scalar(curve: str, k: int | str) -> None:
    c, gp = CURVES[curve], glv_params(curve)
    k = {"r-1": c.r - 1, "lambda": gp.lam, "r+lambda": c.r + gp.lam}.get(k, k) if isinstance(k, str) else k
    base = g1_to_mont([g1_mul(c, c.g1, 7)], c)
    expect = native.g1_scalar_mul(curve, base[0], k % c.r)
    assert np.array_equal(native.msm_g1(curve, base, limbs(k)), expect)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_an_msm_whose_points_include_fixed_points_of_phi_and_their_negatives(curve: str) -> None:
    # P and -P, phi(P) and P with scalars that cancel: the split's signs and the batch's
    # doubling and cancellation cases all meet in one window
    c, gp = CURVES[curve], glv_params(curve)
    p = g1_mul(c, c.g1, 99)
    assert p is not None
    phi = (gp.beta * p[0] % c.p, p[1])
    neg = (p[0], -p[1] % c.p)
    bases = g1_to_mont([p, neg, phi, p, p], c)
    ks = [5, 5, 1, c.r - gp.lam, 2**200]
    expect = native.g1_scalar_mul(curve, bases[0], 2**200 % c.r)
    assert np.array_equal(native.msm_g1(curve, bases, np.concatenate([limbs(k) for k in ks])), expect)
