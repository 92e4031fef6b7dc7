"""The kernels' Poseidon permutation (kernels/poseidon.h) against a few lines of Python ints,
for any constants the caller gives, on both scalar fields; the CPU entry point and the GPU
kernel (run by the host emulation) are the one body."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, fr_to_limbs, limbs_to_ints


def reference(state: list[int], rc: list[int], mds: list[int], r_f: int, r_p: int, p: int) -> list[int]:
    """Poseidon's rounds as the paper states them: add the round's constants, x^5 on every lane
    (full round) or lane 0 (partial), then the MDS product."""
    s = list(state)
    for rnd in range(r_f + r_p):
        full = rnd < r_f // 2 or rnd >= r_f // 2 + r_p
        t = [(x + rc[3 * rnd + i]) % p for i, x in enumerate(s)]
        t = [pow(x, 5, p) if full or i == 0 else x for i, x in enumerate(t)]
        s = [sum(mds[3 * i + j] * t[j] for j in range(3)) % p for i in range(3)]
    return s


def _instance(seed: int, p: int) -> tuple[random.Random, int, int, list[int], list[int]]:
    rng = random.Random(seed)
    r_f, r_p = rng.choice([0, 2, 4, 8]), rng.randrange(0, 12)
    rc = [rng.randrange(p) for _ in range(3 * (r_f + r_p))]
    mds = [rng.randrange(p) for _ in range(9)]
    return rng, r_f, r_p, rc, mds


@settings(max_examples=30, deadline=None)
@given(curve=st.sampled_from(sorted(CURVES)), seed=st.integers(0, 2**32), n=st.integers(0, 5))
def test_the_permutation_is_the_papers_rounds_for_any_constants(curve: str, seed: int, n: int) -> None:
    p = CURVES[curve].r
    rng, r_f, r_p, rc, mds = _instance(seed, p)
    states = [[rng.choice([0, 1, p - 1, rng.randrange(p)]) for _ in range(3)] for _ in range(n)]
    arr = fr_to_limbs([x for s in states for x in s], CURVES[curve]).reshape(n, 3, 4)
    out = native.poseidon3(curve, arr, fr_to_limbs(rc, CURVES[curve]).reshape(-1, 4),
                           fr_to_limbs(mds, CURVES[curve]).reshape(-1, 4), r_f, r_p)
    got = limbs_to_ints(out.reshape(-1, 4))
    assert [got[3 * i: 3 * i + 3] for i in range(n)] == [reference(s, rc, mds, r_f, r_p, p) for s in states]


def test_the_gpu_kernel_permutes_as_the_cpu_entry_point() -> None:
    from tests.prover.grid_emu import EmulatedGrid

    c = CURVES["bls12381"]
    p, mont = c.r, 1 << 256
    rng, r_f, r_p = random.Random(1), 8, 5
    rc, mds = [rng.randrange(p) for _ in range(3 * (r_f + r_p))], [rng.randrange(p) for _ in range(9)]
    states = [[1, 2, 3], [0, 0, 0], [p - 1, 5, 7]]

    def to_mont(xs: list[int]) -> np.ndarray:
        return fr_to_limbs([x * mont % p for x in xs], c).reshape(-1, 4)

    dev = to_mont([x for s in states for x in s])
    EmulatedGrid()._launch("bls12381_fr_k_poseidon3", len(states), dev, to_mont(rc), to_mont(mds),
                           np.uint64(len(states)), np.int32(r_f), np.int32(r_p))
    got = [x * pow(mont, -1, p) % p for x in limbs_to_ints(dev)]
    assert [got[3 * i: 3 * i + 3] for i in range(3)] == [reference(s, rc, mds, r_f, r_p, p) for s in states]


def test_parameters_that_do_not_fit_are_refused() -> None:
    c = CURVES["bls12381"]
    zeros = np.zeros((1, 3, 4), np.uint64)
    with pytest.raises(ValueError, match="even full count"):
        native.poseidon3("bls12381", zeros, np.zeros((9, 4), np.uint64), np.zeros((9, 4), np.uint64), 1, 2)
    with pytest.raises(ValueError, match="round_constants"):
        native.poseidon3("bls12381", zeros, np.zeros((3, 4), np.uint64), np.zeros((9, 4), np.uint64), 2, 0)
    with pytest.raises(ValueError, match="states"):
        native.poseidon3("bls12381", np.zeros((1, 4), np.uint64), fr_to_limbs([0] * 6, c).reshape(-1, 4),
                         np.zeros((9, 4), np.uint64), 2, 0)
