"""Pippenger MSM and fixed-base batches against naive sums (py_ecc) and arkworks."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import (
    CURVES,
    fr_to_limbs,
    g1_from_mont,
    g1_to_mont,
    g2_from_mont,
    g2_to_mont,
)
from tests.prover import ecc, ecc_g1_ints, ecc_g2_ints

CURVE_NAMES = sorted(CURVES)


def oracle_points(curve: str, group: str, ks: Sequence[int | None]):
    """k·G for each k via py_ecc (None -> infinity), as Python ints."""
    c = CURVES[curve]
    m = ecc(c)
    gen, ints = (m.G1, ecc_g1_ints) if group == "g1" else (m.G2, ecc_g2_ints)
    return [None if k is None or k % c.r == 0 else ints(m.multiply(gen, k % c.r)) for k in ks]


def enc(curve: str, group: str, pts):
    return (g1_to_mont if group == "g1" else g2_to_mont)(pts, CURVES[curve])


def dec(curve: str, group: str, arr):
    return (g1_from_mont if group == "g1" else g2_from_mont)(arr, CURVES[curve])


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 12))
def test_msm_small_vs_naive(curve: str, group: str, seed: int, n: int) -> None:
    c = CURVES[curve]
    rng = random.Random(seed)
    if group == "g2":
        n = min(n, 5)  # py_ecc's G2 is slow; arkworks covers large G2 MSMs below
    # discrete logs of the bases: the naive answer is then (sum k_i s_i)·G
    ks = [rng.choice([None, 1, 2, rng.randrange(1, c.r)]) for _ in range(n)]
    if n > 2:
        ks[1] = ks[0]  # a repeated point
    ss = [rng.choice([0, 1, c.r - 1, 2**255 % c.r, rng.randrange(c.r)]) for _ in range(n)]
    bases = enc(curve, group, oracle_points(curve, group, ks))
    total = sum((k or 0) * s for k, s in zip(ks, ss, strict=False)) % c.r
    expect = oracle_points(curve, group, [total])[0]
    fn = getattr(native, f"msm_{group}")
    got = fn(curve, bases, fr_to_limbs(ss))
    assert dec(curve, group, got)[0] == expect
    assert np.array_equal(fn(curve, bases, fr_to_limbs(ss), threads=1), got)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_msm_edge_cases(curve: str) -> None:
    c = CURVES[curve]
    G = oracle_points(curve, "g1", [1])[0]
    one = enc(curve, "g1", [G])
    # n = 1 with r - 1: -G
    assert dec(curve, "g1", native.msm_g1(curve, one, fr_to_limbs([c.r - 1])))[0] == (
        G[0],
        c.p - G[1],
    )
    # all-zero scalars, and only infinity bases -> infinity
    assert not native.msm_g1(curve, one, fr_to_limbs([0])).any()
    inf = enc(curve, "g1", [None, None])
    assert not native.msm_g1(curve, inf, fr_to_limbs([5, 7])).any()
    # P and -P cancel inside one bucket
    P = oracle_points(curve, "g1", [77])[0]
    negP = (P[0], c.p - P[1])
    assert not native.msm_g1(curve, enc(curve, "g1", [P, negP]), fr_to_limbs([3, 3])).any()
    # n = 0
    assert not native.msm_g1(curve, np.zeros((0, 2 * c.fp_limbs), np.uint64), fr_to_limbs([])).any()


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_fixed_base_batch_vs_py_ecc(curve: str, group: str) -> None:
    c = CURVES[curve]
    rng = random.Random(5)
    ks = [0, 1, 2, c.r - 1, 2**255 % c.r] + [rng.randrange(c.r) for _ in range(5 if group == "g1" else 2)]
    got = getattr(native, f"{group}_mul_generator_batch")(curve, fr_to_limbs(ks))
    assert dec(curve, group, got) == oracle_points(curve, group, ks)


def _ark_points(group: str, ks: list[int]):
    import py_arkworks_bls12381 as ark

    cls = ark.G1Point if group == "g1" else ark.G2Point
    g = cls()
    return [g * ark.Scalar(k) for k in ks]


def _ark_to_ints(group: str, pt) -> object:
    b = pt.to_xy_bytes_le()
    v = [int.from_bytes(b[i : i + 48], "little") for i in range(0, len(b), 48)]
    return (v[0], v[1]) if group == "g1" else ((v[0], v[1]), (v[2], v[3]))


@pytest.mark.parametrize("group,n", [("g1", 3000), ("g2", 400)])
def test_msm_vs_arkworks(group: str, n: int) -> None:
    import py_arkworks_bls12381 as ark

    c = CURVES["bls12381"]
    rng = random.Random(n)
    # bases from our fixed-base kernel are checked against arkworks' own k·G here too
    ks = [rng.randrange(1, c.r) for _ in range(n)]
    bases = getattr(native, f"{group}_mul_generator_batch")("bls12381", fr_to_limbs(ks))
    ark_bases = _ark_points(group, ks)
    sample = rng.sample(range(n), 5)
    pts = dec("bls12381", group, bases[sample])
    assert pts == [_ark_to_ints(group, ark_bases[i]) for i in sample]
    ss = [rng.randrange(c.r) for _ in range(n)]
    ss[0], ss[1], ss[2] = 0, c.r - 1, 1
    cls = ark.G1Point if group == "g1" else ark.G2Point
    expect = cls.multiexp_unchecked(ark_bases, [ark.Scalar(s) for s in ss])
    for threads in (1, 2):
        got = getattr(native, f"msm_{group}")("bls12381", bases, fr_to_limbs(ss), threads=threads)
        assert dec("bls12381", group, got)[0] == _ark_to_ints(group, expect)


def test_msm_bn128_larger_window() -> None:
    # bn128 has no arkworks binding here: check a 2^11 MSM (window > 8 bits) against the
    # linearity identity msm(k·G, s) = (sum k s)·G with py_ecc computing only the right side
    c = CURVES["bn128"]
    rng = random.Random(11)
    n = 2048
    ks = [rng.randrange(c.r) for _ in range(n)]
    ss = [rng.randrange(c.r) for _ in range(n)]
    bases = native.g1_mul_generator_batch("bn128", fr_to_limbs(ks))
    assert native.msm_window("bn128", "g1", n) >= 9
    got = dec("bn128", "g1", native.msm_g1("bn128", bases, fr_to_limbs(ss)))[0]
    total = sum(k * s for k, s in zip(ks, ss, strict=False)) % c.r
    assert got == oracle_points("bn128", "g1", [total])[0]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_batch_affine_msm_with_repeated_negated_and_infinite_bases(curve: str, group: str) -> None:
    # 2^13 points take the batch-affine bucket path (window >= 11). Bases drawn from a pool of
    # 40 discrete logs and their negations, plus infinity, make buckets meet their own x:
    # doublings and cancellations, which must fall back to the general formula.
    c = CURVES[curve]
    rng = random.Random(13)
    n = 8192
    assert native.msm_window(curve, group, n) >= 11
    pool = [rng.randrange(1, c.r) for _ in range(40)]
    ks = [rng.choice([0, *pool, *(c.r - k for k in pool)]) for _ in range(n)]
    ss = [rng.choice([1, 2, c.r - 1, rng.randrange(c.r)]) for _ in range(n)]
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, fr_to_limbs(ks))
    total = sum(k * s for k, s in zip(ks, ss, strict=True)) % c.r
    expect = oracle_points(curve, group, [total])[0]
    for threads in (1, 2):
        got = getattr(native, f"msm_{group}")(curve, bases, fr_to_limbs(ss), threads=threads)
        assert dec(curve, group, got)[0] == expect


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_an_msm_over_rows_reads_only_those_rows(curve: str, group: str) -> None:
    c = CURVES[curve]
    rng = random.Random(7)
    # the bases' values do not matter here (the same MSM reads them both ways): made natively
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, fr_to_limbs([rng.randrange(1, c.r) for _ in range(9)]))
    scalars = fr_to_limbs([rng.randrange(c.r) for _ in range(9)])
    rows = np.array([0, 3, 4, 8], dtype=np.int64)
    fn = getattr(native, f"msm_{group}")
    assert np.array_equal(fn(curve, bases, scalars, rows=rows), fn(curve, bases[rows], scalars[rows]))
    with pytest.raises(ValueError, match="rows"):
        fn(curve, bases, scalars, rows=np.array([9]))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("bits", [1, 5, 64, 130])
def test_an_msm_of_short_scalars_has_fewer_windows_and_the_same_sum(curve: str, group: str, bits: int) -> None:
    # the windows follow the largest scalar's length, and the top one its few buckets
    c = CURVES[curve]
    rng = random.Random(bits)
    n = 40 if group == "g1" else 6
    ks = [rng.randrange(1, c.r) for _ in range(n)]
    ss = [rng.randrange(2**bits) for _ in range(n)]
    # k·G by the native batch (held to py_ecc by test_fixed_base_batch_vs_py_ecc); the sum by py_ecc
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, fr_to_limbs(ks))
    expect = oracle_points(curve, group, [sum(k * s for k, s in zip(ks, ss, strict=True)) % c.r])[0]
    assert dec(curve, group, getattr(native, f"msm_{group}")(curve, bases, fr_to_limbs(ss)))[0] == expect
