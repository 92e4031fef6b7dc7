"""GPU kernels against the CPU kernels (themselves checked against py_ecc/arkworks).

Marked gpu; skipped with the reason where no CUDA device is usable (CI has none)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.prover import gpu, native
from engine.prover.curves import CURVES, fr_to_limbs

pytestmark = pytest.mark.gpu

CURVE_NAMES = sorted(CURVES)


@pytest.fixture(scope="module")
def dev() -> gpu.GpuDevice:
    if not gpu.gpu_available():
        pytest.skip(f"no GPU: {gpu.gpu_unavailable_reason()}")
    return gpu.get_device(0)


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
def test_msm_matches_cpu(dev: gpu.GpuDevice, curve: str, group: str, n: int) -> None:
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
def test_msm_all_equal_scalars(dev: gpu.GpuDevice, curve: str) -> None:
    # every point lands in the same bucket of every window: the worst bucket imbalance
    c = CURVES[curve]
    n = 2048
    bases = native.g1_mul_generator_batch(curve, random_scalars(c, n, 3))
    scalars = fr_to_limbs([c.r - 2] * n)
    assert np.array_equal(dev.msm_g1(curve, bases, scalars), native.msm_g1(curve, bases, scalars))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("log_n", [0, 1, 5, 12, 16])
def test_ntt_matches_cpu(dev: gpu.GpuDevice, curve: str, log_n: int) -> None:
    c = CURVES[curve]
    a = random_scalars(c, 1 << log_n, log_n)
    assert np.array_equal(dev.ntt(curve, a), native.ntt(curve, a))
    assert np.array_equal(dev.ntt(curve, a, inverse=True), native.ntt(curve, a, inverse=True))


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("log_n", [3, 14])
def test_h_coset_matches_cpu(dev: gpu.GpuDevice, curve: str, log_n: int) -> None:
    c = CURVES[curve]
    n = 1 << log_n
    a, b = random_scalars(c, n, 1), random_scalars(c, n, 2)
    cc = native.fr_mul(curve, a, b)
    pending = dev.h_coset_async(curve, a, b, cc)
    assert np.array_equal(pending.wait(), native.h_coset(curve, a, b, cc))
