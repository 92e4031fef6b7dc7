"""G1/G2 point arithmetic of the native kernels against py_ecc, both curves."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import (
    CURVES,
    g1_from_mont,
    g1_to_mont,
    g2_from_mont,
    g2_to_mont,
)
from tests.prover import ecc, ecc_g1, ecc_g1_ints, ecc_g2, ecc_g2_ints

CURVE_NAMES = sorted(CURVES)


class Group:
    """One group seen both through the kernels (mont arrays) and py_ecc (oracle)."""

    def __init__(self, curve: str, g: str) -> None:
        self.curve, self.g = curve, g
        self.c = CURVES[curve]
        self.m = ecc(self.c)
        self.to_mont = g1_to_mont if g == "g1" else g2_to_mont
        self.from_mont = g1_from_mont if g == "g1" else g2_from_mont
        self.to_ecc = (lambda p: ecc_g1(self.c, p)) if g == "g1" else (lambda p: ecc_g2(self.c, p))
        self.ints = ecc_g1_ints if g == "g1" else ecc_g2_ints
        self.gen = self.m.G1 if g == "g1" else self.m.G2
        self.add_affine = getattr(native, f"{g}_add_affine")
        self.add_proj = getattr(native, f"{g}_add_projective")
        self.double = getattr(native, f"{g}_double")
        self.smul = getattr(native, f"{g}_scalar_mul")

    def point(self, k: int):  # k·G as python ints (None = infinity)
        return self.ints(self.m.multiply(self.gen, k % self.c.r) if k % self.c.r else None)

    def enc(self, p):
        return self.to_mont([p], self.c)[0]

    def dec(self, arr):
        return self.from_mont(arr, self.c)[0]


GROUPS = [(c, g) for c in CURVE_NAMES for g in ("g1", "g2")]


@pytest.fixture(scope="module", params=GROUPS, ids=lambda p: f"{p[0]}-{p[1]}")
def grp(request: pytest.FixtureRequest) -> Group:
    return Group(*request.param)


def test_edge_cases(grp: Group) -> None:
    P = grp.point(12345)
    Q = grp.point(678)
    negP = grp.point(-12345)
    m = grp.m
    expect_sum = grp.ints(m.add(grp.to_ecc(P), grp.to_ecc(Q)))
    expect_dbl = grp.ints(m.double(grp.to_ecc(P)))
    for add in (grp.add_affine, grp.add_proj):
        assert grp.dec(add(grp.curve, grp.enc(P), grp.enc(Q))) == expect_sum
        assert grp.dec(add(grp.curve, grp.enc(P), grp.enc(negP))) is None  # P + (-P)
        assert grp.dec(add(grp.curve, grp.enc(P), grp.enc(P))) == expect_dbl  # P + P via add
        assert grp.dec(add(grp.curve, grp.enc(None), grp.enc(P))) == P
        assert grp.dec(add(grp.curve, grp.enc(P), grp.enc(None))) == P
        assert grp.dec(add(grp.curve, grp.enc(None), grp.enc(None))) is None
    assert grp.dec(grp.double(grp.curve, grp.enc(P))) == expect_dbl
    assert grp.dec(grp.double(grp.curve, grp.enc(None))) is None
    G = grp.enc(grp.point(1))
    r = grp.c.r
    assert grp.dec(grp.smul(grp.curve, G, 0)) is None
    assert grp.dec(grp.smul(grp.curve, G, r)) is None  # subgroup order: r·G = O
    assert grp.dec(grp.smul(grp.curve, G, r - 1)) == grp.point(-1)
    assert grp.dec(grp.smul(grp.curve, G, 1)) == grp.point(1)
    assert grp.dec(grp.smul(grp.curve, grp.enc(None), 99)) is None
    # the kernel's raw 256-bit scalar path (no reduction): (r + 5)·G = 5·G
    from engine.prover.params.curves import fr_to_limbs

    assert grp.dec(grp.smul(grp.curve, G, fr_to_limbs([r + 5])[0])) == grp.point(5)


@settings(max_examples=4, deadline=None)
@given(a=st.integers(1, 2**256), b=st.integers(1, 2**256))
def test_random_add_and_mul(grp: Group, a: int, b: int) -> None:
    m = grp.m
    P, Q = grp.point(a), grp.point(b)
    expect = grp.point(a + b)
    assert grp.dec(grp.add_affine(grp.curve, grp.enc(P), grp.enc(Q))) == expect
    assert grp.dec(grp.add_proj(grp.curve, grp.enc(P), grp.enc(Q))) == expect
    k = random.Random(a ^ b).randrange(grp.c.r)
    got = grp.dec(grp.smul(grp.curve, grp.enc(P), k))
    exp = grp.ints(m.multiply(grp.to_ecc(P), k)) if k else None
    assert got == exp


def test_results_on_curve(grp: Group) -> None:
    R = grp.dec(grp.smul(grp.curve, grp.enc(grp.point(1)), 2**200 + 17))
    assert grp.m.is_on_curve(grp.to_ecc(R), grp.m.b if grp.g == "g1" else grp.m.b2)
