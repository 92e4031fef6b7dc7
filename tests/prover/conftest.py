"""The device the GPU kernels' tests run on: the host emulation of the grid on every run, and a
real device where one is usable (bench/gpu_check.sh runs the `gpu` marker)."""

from __future__ import annotations

import pytest

from engine.prover.backends import cuda
from tests.prover.grid_emu import EmulatedGrid


@pytest.fixture(scope="module", params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def dev(request: pytest.FixtureRequest) -> cuda.Grid:
    if request.param == "emulated":
        return EmulatedGrid()
    if not cuda.gpu_available():
        pytest.skip(f"no GPU: {cuda.gpu_unavailable_reason()}")
    return cuda.get_device(0)
