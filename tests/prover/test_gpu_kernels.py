"""The GPU's algorithms against the CPU kernels (themselves checked against py_ecc/arkworks),
on two grids: the host emulation of the kernels (every run, CI included) and a real device
(marked gpu; skipped with the reason where no CUDA device is usable). The emulation runs a
Python call per thread, so it takes the small sizes only."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.prover.backends import cuda
from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, fr_to_limbs
from tests.prover.grid_emu import EmulatedGrid

CURVE_NAMES = sorted(CURVES)
EMULATED_MAX = 1 << 12  # the largest size the emulated grid is given


def small_on_emulation(dev: cuda.Grid, n: int) -> None:
    if isinstance(dev, EmulatedGrid) and n > EMULATED_MAX:
        pytest.skip(f"{n} is past the emulated grid's sizes (a GPU runs it)")


def witness_like(c, n: int, seed: int) -> np.ndarray:
    """Mostly 0 and 1, a few small and a few full-size values: a circuit's witness."""
    rng = random.Random(seed)
    return fr_to_limbs([rng.choice([0, 0, 0, 1, 1, 1, 2, 255]) if rng.random() < 0.95 else rng.randrange(c.r)
                        for _ in range(n)])


def random_scalars(c, n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    vals = [rng.randrange(c.r) for _ in range(n)]
    for i, v in enumerate([0, 1, c.r - 1]):
        if i < n:
            vals[i] = v
    return fr_to_limbs(vals)


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("n", [1, 37, 1 << 12, 1 << 16])
def test_msm_matches_cpu(dev: cuda.Grid, curve: str, group: str, n: int) -> None:
    small_on_emulation(dev, n)
    c = CURVES[curve]
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, random_scalars(c, n, n + 1))
    if n > 2:
        bases[2] = 0  # the point at infinity among the bases
        bases[1] = bases[0]  # a repeated point
    scalars = random_scalars(c, n, n)
    want = getattr(native, f"msm_{group}")(curve, bases, scalars)
    pending = getattr(dev, f"msm_{group}_async")(curve, dev.upload_bases(bases), scalars)
    assert np.array_equal(pending.wait(), want)


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("n", [1000, 1 << 16])
def test_msm_of_witness_like_scalars_matches_cpu(dev: cuda.Grid, curve: str, group: str, n: int) -> None:
    # nearly every point lands in bucket 1 of window 0: summed by chunks and a tree of levels
    small_on_emulation(dev, n)
    c = CURVES[curve]
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, random_scalars(c, n, 5))
    scalars = witness_like(c, n, n)
    got = getattr(dev, f"msm_{group}_async")(curve, dev.upload_bases(bases), scalars).wait()
    assert np.array_equal(got, getattr(native, f"msm_{group}")(curve, bases, scalars))


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_msm_of_zero_scalars_is_the_point_at_infinity(dev: cuda.Grid, curve: str) -> None:
    c = CURVES[curve]
    bases = native.g1_mul_generator_batch(curve, random_scalars(c, 300, 4))
    assert not dev.msm_g1(curve, bases, np.zeros((300, 4), np.uint64)).any()


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_msm_all_equal_scalars(dev: cuda.Grid, curve: str) -> None:
    # every point lands in the same bucket of every window: the worst bucket imbalance
    c = CURVES[curve]
    n = 2048
    bases = native.g1_mul_generator_batch(curve, random_scalars(c, n, 3))
    scalars = fr_to_limbs([c.r - 2] * n)
    assert np.array_equal(dev.msm_g1(curve, bases, scalars), native.msm_g1(curve, bases, scalars))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("log_n", [0, 1, 5, 12, 16])
def test_ntt_matches_cpu(dev: cuda.Grid, curve: str, log_n: int) -> None:
    small_on_emulation(dev, 1 << log_n)
    c = CURVES[curve]
    a = random_scalars(c, 1 << log_n, log_n)
    assert np.array_equal(dev.ntt(curve, a), native.ntt(curve, a))
    assert np.array_equal(dev.ntt(curve, a, inverse=True), native.ntt(curve, a, inverse=True))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("log_n", [3, 10, 14])
def test_h_coset_matches_cpu(dev: cuda.Grid, curve: str, log_n: int) -> None:
    small_on_emulation(dev, 1 << log_n)
    c = CURVES[curve]
    n = 1 << log_n
    a, b = random_scalars(c, n, 1), random_scalars(c, n, 2)
    cc = native.fr_mul(curve, a, b)
    pending = dev.h_coset_async(curve, a, b, cc)
    assert np.array_equal(pending.wait(), native.h_coset(curve, a, b, cc))
