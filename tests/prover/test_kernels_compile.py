"""The GPU kernels compile for sm_90 with NVRTC, with no GPU or driver on the machine.

This is how CI (which has no GPU) catches a GPU build break. The full CUBIN build (NVRTC
front end plus ptxas) is slow the first time, then cached on disk by source hash."""

from __future__ import annotations

import pytest

from engine.prover.backends import cuda


def _nvrtc_or_skip() -> None:
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # NVRTC is a declared dependency: report it loudly when missing
        pytest.fail(f"NVRTC unusable (install nvidia-cuda-nvrtc): {e}")


def test_gpu_available_never_raises() -> None:
    assert isinstance(cuda.gpu_available(), bool)
    assert isinstance(cuda.gpu_unavailable_reason(), str)


def test_ptx_for_compute_90_contains_every_kernel() -> None:
    _nvrtc_or_skip()
    ptx = cuda.compile_for_arch("compute_90").decode()
    assert ".target sm_90" in ptx
    for name in cuda.kernel_names():
        assert f".entry {name}(" in ptx, name


@pytest.mark.slow
def test_cubin_for_sm_90() -> None:
    _nvrtc_or_skip()
    cubin = cuda.compile_for_arch("sm_90")
    assert cubin[:4] == b"\x7fELF"
    for name in cuda.kernel_names():
        assert name.encode() in cubin, name


def test_sources_shared_with_cpu_build() -> None:
    # the CPU and GPU builds must compile the very same arithmetic headers
    from engine.prover.backends.cpu import native

    shared = {"port.h", "field.h", "field_fp2.h", "curve.h", "instances.h"}
    assert shared <= set(native.KERNEL_FILES) and shared <= set(cuda.GPU_KERNEL_FILES)


def test_a_machine_without_an_nvidia_driver_is_told_so_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    # not CUDA's "driver version is insufficient", which reads like a fault of a driver that is not there
    from engine.prover.backends import driver

    monkeypatch.setattr(driver, "NVIDIA_DRIVER_PATHS", ("/no/such/device",))
    assert not cuda.gpu_available()
    assert cuda.gpu_unavailable_reason() == "no NVIDIA GPU on this machine (no NVIDIA driver)"
