"""The CPU backend's MSM pool (kernels/groth16.h groth16_msm_pool, through groth16_native.msm_pool):
several MSMs of both groups on one thread team, bounded in the plans alive at once, give each
job exactly the point its own MSM gives, whatever the jobs, their order and the threads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import groth16_native, native
from engine.prover.params.curves import get_curve
from tests.prover.test_gpu_kernels import random_scalars, witness_like

CURVE = "bn128"


def bases_with_infinity(group: str, n: int, seed: int) -> np.ndarray:
    """n points of ``group``, every third one the point at infinity (all-zero), as a key's
    bases are where a signal is absent from A or B."""
    make = native.g1_mul_generator_batch if group == "g1" else native.g2_mul_generator_batch
    pts = make(CURVE, random_scalars(get_curve(CURVE), n, seed))
    pts[::3] = 0
    return pts


job_shapes = st.lists(st.tuples(st.sampled_from(["g1", "g2"]), st.integers(0, 200), st.integers(0, 3),
                                st.sampled_from(["witness", "random"])), min_size=1, max_size=5)


@settings(max_examples=12, deadline=None)
@given(shapes=job_shapes, threads=st.sampled_from([1, 2, 6]), seed=st.integers(0, 2**32))
def test_the_pool_gives_each_job_its_own_msm(shapes: list[tuple[str, int, int, str]], threads: int,
                                             seed: int) -> None:
    c = get_curve(CURVE)
    jobs, want = [], []
    for i, (group, n, first_row, kind) in enumerate(shapes):
        bases = bases_with_infinity(group, n, seed + i)
        scalars = (witness_like if kind == "witness" else random_scalars)(c, first_row + n, seed + 7 * i)
        jobs.append((group, bases, scalars, first_row))
        msm = native.msm_g1 if group == "g1" else native.msm_g2
        want.append(msm(CURVE, bases, scalars[first_row:]).tobytes() if n else bytes(bases.shape[1] * 8))
    assert groth16_native.msm_pool(c, jobs, threads) == want
