"""NTT, coset scaling, the fused H evaluation and sparse mat-vec, against naive Python."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, fr_to_limbs, limbs_to_ints, root_of_unity

CURVE_NAMES = sorted(CURVES)


def naive_dft(vals: list[int], w: int, r: int) -> list[int]:
    n = len(vals)
    return [sum(v * pow(w, j * k, r) for j, v in enumerate(vals)) % r for k in range(n)]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=8, deadline=None)
@given(log_n=st.integers(0, 5), seed=st.integers(0, 2**32))
def test_ntt_matches_naive_dft(curve: str, log_n: int, seed: int) -> None:
    c = CURVES[curve]
    rng = random.Random(seed)
    n = 1 << log_n
    vals = [rng.choice([0, 1, c.r - 1, rng.randrange(c.r)]) for _ in range(n)]
    w = root_of_unity(c, log_n)
    a = fr_to_limbs(vals)
    assert limbs_to_ints(native.ntt(curve, a)) == naive_dft(vals, w, c.r)
    inv = [v * pow(n, -1, c.r) % c.r for v in naive_dft(vals, pow(w, -1, c.r), c.r)]
    assert limbs_to_ints(native.ntt(curve, a, inverse=True)) == inv


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_inverse_after_forward_is_identity_large(curve: str) -> None:
    # 2^14: large enough for the threaded butterfly loop
    c = CURVES[curve]
    rng = np.random.default_rng(1)
    vals = [int(x) % c.r for x in rng.integers(0, 2**63, size=1 << 14)]
    a = fr_to_limbs(vals)
    fw = native.ntt(curve, a)
    assert not np.array_equal(fw, a)
    assert np.array_equal(native.ntt(curve, fw, inverse=True), a)
    assert np.array_equal(native.ntt(curve, a, threads=1), fw)
    # and a few outputs against the definition (the threaded bit reversal included)
    w, got = root_of_unity(c, 14), limbs_to_ints(fw)
    for k in (1, 5, 12345):
        assert got[k] == sum(v * pow(w, j * k, c.r) for j, v in enumerate(vals)) % c.r


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_coset_scale(curve: str) -> None:
    c = CURVES[curve]
    rng = random.Random(3)
    vals = [rng.randrange(c.r) for _ in range(5000)]
    g = rng.randrange(c.r)
    got = limbs_to_ints(native.coset_scale(curve, fr_to_limbs(vals), g))
    assert got == [v * pow(g, k, c.r) % c.r for k, v in enumerate(vals)]


def naive_h(vals_a, vals_b, vals_c, shift, c) -> list[int]:
    r, n = c.r, len(vals_a)
    w = root_of_unity(c, n.bit_length() - 1)
    winv, ninv = pow(w, -1, r), pow(n, -1, r)

    def coeffs(v):
        return [x * ninv % r for x in naive_dft(v, winv, r)]

    def evaluate(co, x):
        return sum(cf * pow(x, j, r) for j, cf in enumerate(co)) % r

    ca, cb, cc = coeffs(vals_a), coeffs(vals_b), coeffs(vals_c)
    pts = [shift * pow(w, k, r) % r for k in range(n)]
    return [(evaluate(ca, x) * evaluate(cb, x) - evaluate(cc, x)) % r for x in pts]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("log_n", [0, 1, 3, 4])
def test_h_coset_matches_naive(curve: str, log_n: int) -> None:
    c = CURVES[curve]
    rng = random.Random(log_n)
    n = 1 << log_n
    va = [rng.randrange(c.r) for _ in range(n)]
    vb = [rng.randrange(c.r) for _ in range(n)]
    vc = [x * y % c.r for x, y in zip(va, vb, strict=False)]  # as in a satisfied R1CS: c = a·b on the domain
    shift = native.h_shift(curve, n)
    assert shift == root_of_unity(c, log_n + 1)  # snarkjs: the odd coset of the 2n domain
    got = native.h_coset(curve, fr_to_limbs(va), fr_to_limbs(vb), fr_to_limbs(vc))
    assert limbs_to_ints(got) == naive_h(va, vb, vc, shift, c)
    # an arbitrary shift too, and inputs must be left untouched
    a_arr = fr_to_limbs(va)
    keep = a_arr.copy()
    got2 = native.h_coset(curve, a_arr, fr_to_limbs(vb), fr_to_limbs(vc), shift=7)
    assert limbs_to_ints(got2) == naive_h(va, vb, vc, 7, c)
    assert np.array_equal(a_arr, keep)


def test_h_shift_at_full_two_adicity() -> None:
    # n = 2^s has no 2n-th root: snarkjs uses nqr^2 there. Only the formula is checked.
    for c in CURVES.values():
        assert native.h_shift(c.name, 1 << c.two_adicity) == 25


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32), rows=st.integers(0, 40), nvars=st.integers(1, 30))
def test_sparse_matvec(curve: str, seed: int, rows: int, nvars: int) -> None:
    c = CURVES[curve]
    rng = random.Random(seed)
    w = [rng.choice([0, 1, c.r - 1, rng.randrange(c.r)]) for _ in range(nvars)]
    row_ptr, cols, coeffs = [0], [], []
    for _ in range(rows):
        for _ in range(rng.randrange(0, 6)):
            cols.append(rng.randrange(nvars))
            coeffs.append(rng.choice([1, c.r - 1, rng.randrange(c.r)]))
        row_ptr.append(len(cols))
    got = native.sparse_matvec(
        curve,
        np.array(row_ptr, dtype=np.int64),
        np.array(cols, dtype=np.int64),
        fr_to_limbs(coeffs).reshape(-1, 4),
        fr_to_limbs(w),
    )
    expect = [sum(coeffs[k] * w[cols[k]] for k in range(row_ptr[i], row_ptr[i + 1])) % c.r for i in range(rows)]
    assert got.shape == (rows, 4)
    assert (limbs_to_ints(got) if rows else []) == expect


def test_input_validation() -> None:
    with pytest.raises(ValueError):
        native.ntt("bn128", np.zeros((3, 4), dtype=np.uint64))
    with pytest.raises(TypeError):
        native.fr_mul("bn128", np.zeros((3, 4), dtype=np.int64), np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(ValueError):
        native.fr_mul("bn128", np.zeros((3, 4), dtype=np.uint64), np.zeros((2, 4), dtype=np.uint64))
    with pytest.raises(ValueError):
        native.ntt("nope", np.zeros((4, 4), dtype=np.uint64))
