"""The GPU's algorithms on the host: the kernels of gpu.cu compiled as plain C and run one
thread index at a time, with numpy in place of CuPy for the array steps (sort, search, sums).

``EmulatedGrid`` is a ``gpu.Grid``: the MSM, NTT and H steps are the very code the GPU runs,
launch for launch, so the tests check the GPU's bucket sort, chunked accumulation, tree
sums, bucket reduction and NTT on machines without a GPU (CI). It is slow (a Python call per
thread): for tests of a few thousand points, not for proving.

The kernels need nothing of CUDA but their thread index (``GID``, port.h), which this build
binds to a global the launcher sets before each call. Atomics and barriers would need more;
the kernels have none.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import subprocess
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from engine.prover.backends.cpu.native_build import KERNEL_DIR, cache_dir, params_prelude
from engine.prover.backends.cuda import Grid, PendingResult, sources_digest

EMU_FLAGS = ["-O2", "-std=gnu99", "-fno-strict-aliasing", "-shared", "-fPIC"]


def emu_source() -> str:
    return params_prelude() + '#include "port.h"\nu64 ps_emu_gid;\n#define GID ps_emu_gid\n#include "gpu.cu"\n'


def _build_key() -> str:
    return sources_digest(emu_source(), EMU_FLAGS)


_lock = threading.Lock()
_libs: dict[str, ctypes.CDLL] = {}


def build() -> ctypes.CDLL:
    """Compiles the kernels for the host once per source hash (cached like the CPU build)."""
    key = _build_key()
    with _lock:
        lib = _libs.get(key)
        if lib is not None:
            return lib
        out = cache_dir() / "kernels" / f"emu-{key}"
        so = out / "grid_emu.so"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "build.lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            if not so.exists():
                _compile(so)
        lib = _libs[key] = ctypes.CDLL(str(so))
        return lib


def _compile(so: Path) -> None:
    src = so.with_suffix(".c")
    src.write_text(emu_source())
    tmp = so.with_name(f"grid_emu.tmp{os.getpid()}.so")
    cmd = [os.environ.get("CC", "cc"), *EMU_FLAGS, f"-I{KERNEL_DIR}", str(src), "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"grid emulation build failed ({' '.join(cmd)}):\n{res.stderr[-4000:]}")
    os.replace(tmp, so)


def _c_arg(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise ValueError("kernel arguments must be contiguous arrays")
        return ctypes.c_void_p(a.ctypes.data)
    if isinstance(a, np.uint64):
        return ctypes.c_uint64(int(a))
    if isinstance(a, np.int32):
        return ctypes.c_int(int(a))
    raise TypeError(f"no C form for kernel argument {type(a).__name__}")


class EmulatedGrid(Grid):
    """The grid on the host: numpy arrays, each launch a loop over its thread indices."""

    arch = "host-emulation"

    def __init__(self) -> None:
        super().__init__()
        self.xp = np
        self.lib = build()
        self._gid = ctypes.c_uint64.in_dll(self.lib, "ps_emu_gid")

    def name(self) -> str:
        return "host emulation of the GPU kernels"

    def _on(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def _launch(self, name: str, threads: int, *args: Any) -> None:
        if threads <= 0:
            return
        fn = getattr(self.lib, name)
        fn.restype = None
        cargs = [_c_arg(a) for a in args]
        gid = self._gid
        for t in range(threads):
            gid.value = t
            fn(*cargs)

    def upload(self, arr: np.ndarray, keep: list[Any] | None = None) -> np.ndarray:
        return np.array(arr, copy=True, order="C")

    def _finish(self, dev: Any, keep: list[Any], post: Any = None) -> PendingResult:
        return PendingResult(None, dev, tuple(dev.shape), keep, post)
