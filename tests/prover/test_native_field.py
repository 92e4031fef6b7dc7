"""Field arithmetic of the native kernels against Python integers, all four prime fields."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, fp_to_limbs, fr_to_limbs, limbs_to_ints, root_of_unity

CURVE_NAMES = sorted(CURVES)


def edge_values(m: int) -> list[int]:
    # limb boundaries and the modulus' neighbourhood are where carry bugs live
    return [0, 1, 2, m - 1, m - 2, (m - 1) // 2, (m + 1) // 2, 2**64 - 1, 2**64, 2**128 - 1] + [
        (2 ** (64 * k)) % m for k in range(1, 7)
    ]


def elements(m: int) -> st.SearchStrategy[list[int]]:
    return st.lists(
        st.one_of(st.integers(0, m - 1), st.sampled_from([v % m for v in edge_values(m)])),
        min_size=1,
        max_size=40,
    )


def check_field(curve: str, which: str, xs: list[int], ys: list[int]) -> None:
    c = CURVES[curve]
    m = c.r if which == "fr" else c.p
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], ys[:n]
    enc = (lambda v: fr_to_limbs(v)) if which == "fr" else (lambda v: fp_to_limbs(v, c))
    a, b = enc(xs), enc(ys)
    ops = {
        "add": (getattr(native, f"{which}_add"), lambda x, y: (x + y) % m),
        "sub": (getattr(native, f"{which}_sub"), lambda x, y: (x - y) % m),
        "mul": (getattr(native, f"{which}_mul"), lambda x, y: x * y % m),
    }
    for name, (fn, ref) in ops.items():
        got = limbs_to_ints(fn(curve, a, b))
        assert got == [ref(x, y) for x, y in zip(xs, ys, strict=False)], name
    inv = limbs_to_ints(getattr(native, f"{which}_inv")(curve, a))
    assert inv == [pow(x, -1, m) if x else 0 for x in xs]
    sqr = limbs_to_ints(getattr(native, f"{which}_sqr")(curve, a))
    assert sqr == [x * x % m for x in xs]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("which", ["fr", "fp"])
def test_edge_values(curve: str, which: str) -> None:
    c = CURVES[curve]
    m = c.r if which == "fr" else c.p
    vals = sorted({v % m for v in edge_values(m)})
    xs = [x for x in vals for _ in vals]
    ys = [y for _ in vals for y in vals]
    check_field(curve, which, xs, ys)


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("which", ["fr", "fp"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random(curve: str, which: str, data: st.DataObject) -> None:
    c = CURVES[curve]
    m = c.r if which == "fr" else c.p
    check_field(curve, which, data.draw(elements(m)), data.draw(elements(m)))


Fp2 = tuple[int, int]  # c0 + c1 u, u^2 = -1


def fp2_limbs(values: list[Fp2], curve: str) -> np.ndarray:
    c = CURVES[curve]
    return np.ascontiguousarray(np.concatenate(
        [fp_to_limbs([v[0] for v in values], c), fp_to_limbs([v[1] for v in values], c)], axis=1))


def fp2_ints(arr: np.ndarray, curve: str) -> list[Fp2]:
    nl = CURVES[curve].fp_limbs
    return list(zip(limbs_to_ints(arr[:, :nl]), limbs_to_ints(arr[:, nl:]), strict=True))


def check_fp2(curve: str, xs: list[Fp2], ys: list[Fp2]) -> None:
    p = CURVES[curve].p
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], ys[:n]
    a, b = fp2_limbs(xs, curve), fp2_limbs(ys, curve)

    def mul(x: Fp2, y: Fp2) -> Fp2:
        return ((x[0] * y[0] - x[1] * y[1]) % p, (x[0] * y[1] + x[1] * y[0]) % p)

    def inv(x: Fp2) -> Fp2:
        norm = (x[0] ** 2 + x[1] ** 2) % p
        k = pow(norm, -1, p) if norm else 0
        return (x[0] * k % p, -x[1] * k % p)

    assert fp2_ints(native.fp2_add(curve, a, b), curve) == [((x[0] + y[0]) % p, (x[1] + y[1]) % p) for x, y in zip(xs, ys, strict=True)]
    assert fp2_ints(native.fp2_sub(curve, a, b), curve) == [((x[0] - y[0]) % p, (x[1] - y[1]) % p) for x, y in zip(xs, ys, strict=True)]
    assert fp2_ints(native.fp2_mul(curve, a, b), curve) == [mul(x, y) for x, y in zip(xs, ys, strict=True)]
    assert fp2_ints(native.fp2_sqr(curve, a), curve) == [mul(x, x) for x in xs]
    assert fp2_ints(native.fp2_inv(curve, a), curve) == [inv(x) for x in xs]


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_fp2_edge_values(curve: str) -> None:
    # the products' double-width differences (a0b0 < a1b1 borrows) and the unreduced sums
    # (a0 + a1 near 2p) are where the lazy Karatsuba could go wrong
    p = CURVES[curve].p
    spread = sorted({v % p for v in edge_values(p)})
    vals = spread[:5] + spread[-6:]  # the five smallest and the six largest, p - 1 among them
    pairs = [(x, y) for x in vals for y in vals]
    check_fp2(curve, [x for x in pairs for _ in pairs], [y for _ in pairs for y in pairs])


@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fp2_random(curve: str, data: st.DataObject) -> None:
    p = CURVES[curve].p
    coeffs = data.draw(elements(p))
    other = data.draw(elements(p))
    xs = list(zip(coeffs, coeffs[1:] + coeffs[:1], strict=True))
    ys = list(zip(other, other[::-1], strict=True))
    check_fp2(curve, xs, ys)


def test_large_vector_threads() -> None:
    # above the OpenMP threshold, so the threaded loop is the one under test
    import random

    rng = random.Random(7)
    c = CURVES["bls12381"]
    xs = [rng.randrange(c.r) for _ in range(5000)]
    ys = [rng.randrange(c.r) for _ in range(5000)]
    got = limbs_to_ints(native.fr_mul("bls12381", fr_to_limbs(xs), fr_to_limbs(ys)))
    assert got == [x * y % c.r for x, y in zip(xs, ys, strict=False)]


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_curve_constants(curve: str) -> None:
    from tests.prover import ecc

    c = CURVES[curve]
    m = ecc(c)
    assert c.p == m.field_modulus and c.r == m.curve_order
    assert c.g1 == (int(m.G1[0]), int(m.G1[1]))
    assert c.g2 == tuple(tuple(int(v) for v in coord.coeffs) for coord in m.G2)
    assert (c.g1[1] ** 2 - c.g1[0] ** 3 - c.b) % c.p == 0
    assert c.b2 == tuple(int(v) for v in m.b2.coeffs)
    assert (c.r - 1) % 2**c.two_adicity == 0 and ((c.r - 1) >> c.two_adicity) % 2 == 1
    # nqr = 5 is the smallest quadratic non-residue (Euler's criterion)
    assert all(pow(q, (c.r - 1) // 2, c.r) == 1 for q in (2, 3, 4))
    assert pow(c.nqr, (c.r - 1) // 2, c.r) == c.r - 1
    for k in (0, 1, 5, c.two_adicity):
        w = root_of_unity(c, k)
        assert pow(w, 2**k, c.r) == 1 and (k == 0 or pow(w, 2 ** (k - 1), c.r) != 1)
    # w[k] = w[k+1]^2, the ffjavascript construction
    assert root_of_unity(c, 10) == pow(root_of_unity(c, 11), 2, c.r)


def test_conversions_roundtrip() -> None:
    from engine.prover.params.curves import g1_from_mont, g1_to_mont, g2_from_mont, g2_to_mont

    for c in CURVES.values():
        pts = [c.g1, None]
        arr = g1_to_mont(pts, c)
        assert arr.shape == (2, 2 * c.fp_limbs) and not arr[1].any()
        assert limbs_to_ints(arr[0, : c.fp_limbs])[0] == c.g1[0] * c.fp_r % c.p
        assert g1_from_mont(arr, c) == pts
        arr2 = g2_to_mont([c.g2, None], c)
        assert arr2.shape == (2, 4 * c.fp_limbs)
        assert g2_from_mont(arr2, c) == [c.g2, None]
