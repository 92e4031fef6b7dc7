"""The arithmetic kernels on an NVIDIA GPU: the same C sources as engine.prover.native,
compiled by NVRTC (through CuPy's bindings) and launched on a CuPy stream.

* ``compile_for_arch("sm_90")`` builds everything without a device (NVRTC needs no driver),
  caching the binary in the project cache keyed by a source hash; CI uses it to catch a
  GPU build break on machines with no GPU.
* ``gpu_available()`` never raises.
* ``GpuDevice(index)`` owns a stream and the loaded module; ``msm_g1_async`` /
  ``msm_g2_async`` / ``ntt_async`` / ``h_coset_async`` enqueue work and return a
  ``PendingResult`` at once; ``.wait()`` blocks and returns the numpy result. Host buffers
  for transfers are pinned so copies run at full PCIe speed and overlap with kernels.

MSM: signed c-bit digits computed on the GPU, (bucket, point) pairs grouped with a device
sort, one thread per bucket accumulating in XYZZ, a parallel per-window bucket reduction
(segments), then one thread combining windows. Window c = log2(n) - 8 clamped to [4, 16].

One module, a little over 400 lines, on purpose: compiling, the device object and its
launches share the stream, the loaded module and the pinned buffers' lifetimes; split,
each part would reach into the others' state. (Untouched in the CPU kernel work: with no
GPU in this workspace a reshuffle could not be run.)
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.prover.curves import CurveParams, get_curve, root_of_unity
from engine.prover.native_build import KERNEL_DIR, SHARED_KERNEL_FILES, cache_dir, params_prelude

GPU_KERNEL_FILES = (*SHARED_KERNEL_FILES, "gpu_fr.h", "gpu_group.h", "gpu.cu")
BLOCK = 256


def kernel_source() -> str:
    return params_prelude() + '#include "gpu.cu"\n'


def nvrtc_options(arch: str) -> list[str]:
    return [
        f"--gpu-architecture={arch}",
        "-std=c++17",
        f"-I{KERNEL_DIR}",
        "-default-device",
        "-diag-suppress=550",
    ]


def source_hash(arch: str) -> str:
    h = hashlib.sha256()
    for name in GPU_KERNEL_FILES:
        h.update(name.encode())
        h.update((KERNEL_DIR / name).read_bytes())
    h.update(kernel_source().encode())
    h.update(repr(nvrtc_options(arch)).encode())
    return h.hexdigest()[:16]


_compile_lock = threading.Lock()


def compile_for_arch(arch: str = "sm_90") -> bytes:
    """All GPU kernels compiled by NVRTC; CUBIN for ``sm_XX``, PTX for ``compute_XX``.

    Works with no GPU or driver present. The result is cached on disk (the build takes
    minutes: several hundred fully unrolled multi-limb multiplications per group kernel).
    """
    import fcntl

    from cupy_backends.cuda.libs import nvrtc

    ptx = arch.startswith("compute_")
    key = source_hash(arch)
    out = cache_dir() / "kernels" / f"gpu-{key}"
    target = out / (f"kernels-{arch}.ptx" if ptx else f"kernels-{arch}.cubin")
    with _compile_lock:
        if target.exists():
            return target.read_bytes()
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "build.lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            if target.exists():
                return target.read_bytes()
            prog = nvrtc.createProgram(kernel_source(), "provingsite_kernels.cu", [], [])
            try:
                try:
                    nvrtc.compileProgram(prog, nvrtc_options(arch))
                except Exception as e:
                    log = nvrtc.getProgramLog(prog)
                    raise RuntimeError(f"NVRTC build for {arch} failed: {e}\n{log[-8000:]}") from e
                data = nvrtc.getPTX(prog) if ptx else nvrtc.getCUBIN(prog)
            finally:
                nvrtc.destroyProgram(prog)
            if isinstance(data, str):
                data = data.encode()
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            return data


def kernel_names() -> list[str]:
    names: list[str] = []
    for curve in ("bn128", "bls12381"):
        for k in (
            "to_mont",
            "from_mont",
            "powers",
            "bitrev",
            "ntt_stage",
            "pointwise_mul",
            "scale",
            "h_final",
        ):
            names.append(f"{curve}_fr_k_{k}")
        for g in ("g1", "g2"):
            for k in ("digits", "buckets", "segments", "combine"):
                names.append(f"{curve}_{g}_k_{k}")
    return names


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device. Never raises."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False


def gpu_unavailable_reason() -> str:
    try:
        import cupy

        n = int(cupy.cuda.runtime.getDeviceCount())
        return "" if n > 0 else "CUDA reports no devices"
    except Exception as e:  # the reason is shown by skipped tests and gpu_check.sh
        return f"no usable GPU: {type(e).__name__}: {e}"


def msm_window_gpu(n: int) -> int:
    lg = max(n, 1).bit_length() - 1
    return max(4, min(16, lg - 8))


@dataclass
class PendingResult:
    """Work enqueued on a stream; ``wait()`` blocks until it finished and returns the result."""

    event: Any
    host: np.ndarray  # pinned buffer the result is copied into
    shape: tuple[int, ...]
    keep: list[Any] = field(default_factory=list)  # buffers that must outlive the kernels
    _value: np.ndarray | None = None

    def done(self) -> bool:
        return bool(self.event.done)

    def wait(self) -> np.ndarray:
        if self._value is None:
            self.event.synchronize()
            self._value = np.array(self.host.reshape(self.shape), copy=True)
            self.keep.clear()
        return self._value


def _fr_mont_const(c: CurveParams, v: int) -> np.ndarray:
    m = (v % c.r) * c.fr_r % c.r
    return np.frombuffer(m.to_bytes(32, "little"), dtype="<u8").astype(np.uint64)


class GpuDevice:
    """One GPU: the loaded kernels, a stream, cached twiddles. Use from one thread at a time
    (callers serialise with a per-device lock, as the engine's GPU workers do)."""

    def __init__(self, index: int = 0) -> None:
        import cupy

        self.cp = cupy
        self.index = index
        self.device = cupy.cuda.Device(index)
        with self.device:
            cc = self.device.compute_capability
            self.arch = f"sm_{cc}"
            binary = compile_for_arch(self.arch)
            path = cache_dir() / "kernels" / f"gpu-{source_hash(self.arch)}" / f"kernels-{self.arch}.cubin"
            if not path.exists():
                path.write_bytes(binary)
            self.module = cupy.RawModule(path=str(path))
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._fns: dict[str, Any] = {}
        self._twiddles: dict[tuple[str, int, bool], Any] = {}

    # -- plumbing ------------------------------------------------------------------------

    def name(self) -> str:
        props = self.cp.cuda.runtime.getDeviceProperties(self.index)
        n = props["name"]
        return n.decode() if isinstance(n, bytes) else str(n)

    def _fn(self, name: str) -> Any:
        f = self._fns.get(name)
        if f is None:
            f = self._fns[name] = self.module.get_function(name)
        return f

    def _launch(self, name: str, threads: int, *args: Any) -> None:
        if threads <= 0:
            return
        grid = (threads + BLOCK - 1) // BLOCK
        # RawKernel launches on the current stream; make ours current for the launch
        with self.device, self.stream:
            self._fn(name)((grid,), (BLOCK,), args)

    def pinned(self, shape: tuple[int, ...], dtype: Any = np.uint64) -> np.ndarray:
        count = int(np.prod(shape))
        mem = self.cp.cuda.alloc_pinned_memory(max(1, count * np.dtype(dtype).itemsize))
        return np.frombuffer(mem, dtype, count).reshape(shape)

    def upload(self, arr: np.ndarray, keep: list[Any] | None = None) -> Any:
        """Async host->device copy through a pinned staging buffer."""
        a = np.ascontiguousarray(arr)
        with self.device:
            stage = self.pinned(a.shape, a.dtype)
            stage[...] = a
            dev = self.cp.empty(a.shape, dtype=a.dtype)
            dev.set(stage, stream=self.stream)
        if keep is not None:
            keep.append(stage)
        else:
            self.stream.synchronize()
        return dev

    def _finish(self, dev: Any, keep: list[Any]) -> PendingResult:
        host = self.pinned(tuple(dev.shape), dev.dtype)
        dev.get(stream=self.stream, out=host, blocking=False)
        ev = self.cp.cuda.Event(block=False, disable_timing=True)
        ev.record(self.stream)
        keep.append(dev)
        return PendingResult(ev, host, tuple(dev.shape), keep)

    def synchronize(self) -> None:
        self.stream.synchronize()

    # -- MSM -----------------------------------------------------------------------------

    def upload_bases(self, bases: np.ndarray) -> Any:
        """Bases (n, 2L or 4L) affine Montgomery to the device, once per proving key."""
        return self.upload(np.ascontiguousarray(bases, dtype=np.uint64))

    def _msm_async(self, curve: str, group: str, bases_dev: Any, scalars: Any) -> PendingResult:
        cp = self.cp
        c = get_curve(curve)
        width = (2 if group == "g1" else 4) * c.fp_limbs
        n = int(bases_dev.shape[0])
        if bases_dev.ndim != 2 or bases_dev.shape[1] != width:
            raise ValueError(f"bases: expected (n, {width}) on the device")
        if n >= 1 << 31:
            raise ValueError("at most 2^31 - 1 points")
        keep: list[Any] = []
        with self.device:
            if isinstance(scalars, np.ndarray):
                if scalars.shape != (n, 4) or scalars.dtype != np.uint64:
                    raise ValueError("scalars: expected (n, 4) uint64")
                sc = self.upload(scalars, keep)
            else:
                sc = cp.ascontiguousarray(scalars, dtype=cp.uint64)
            pre = f"{c.name}_{group}"
            cw = msm_window_gpu(n)
            nwin = (256 + cw) // cw
            half = 1 << (cw - 1)
            nb = nwin * half
            with self.stream:
                keys = cp.empty(nwin * n, dtype=cp.uint32)
                vals = cp.empty(nwin * n, dtype=cp.uint32)
                self._launch(f"{pre}_k_digits", n, keys, vals, sc, np.uint64(n), np.int32(cw), np.int32(nwin))
                order = cp.argsort(keys)
                skeys = keys[order]
                svals = cp.ascontiguousarray(vals[order])
                starts = cp.searchsorted(skeys, cp.arange(nb + 1, dtype=cp.uint32)).astype(cp.int64)
                buckets = cp.empty((nb, 2 * width), dtype=cp.uint64)
                self._launch(f"{pre}_k_buckets", nb, buckets, bases_dev, svals, starts, np.uint64(nb))
                S = max(1, min(half, 8192 // nwin))
                seg = cp.empty((nwin * S, 2 * width), dtype=cp.uint64)
                self._launch(f"{pre}_k_segments", nwin * S, seg, buckets, np.uint64(half), np.int32(nwin), np.uint64(S))
                out = cp.zeros((1, width), dtype=cp.uint64)
                self._launch(f"{pre}_k_combine", 1, out, seg, np.int32(nwin), np.uint64(S), np.int32(cw))
            keep += [keys, vals, order, skeys, svals, starts, buckets, seg, sc]
            pending = self._finish(out, keep)
        pending.shape = (width,)
        return pending

    def msm_g1_async(self, curve: str, bases_dev: Any, scalars: Any) -> PendingResult:
        return self._msm_async(curve, "g1", bases_dev, scalars)

    def msm_g2_async(self, curve: str, bases_dev: Any, scalars: Any) -> PendingResult:
        return self._msm_async(curve, "g2", bases_dev, scalars)

    def msm_g1(self, curve: str, bases: np.ndarray, scalars: np.ndarray) -> np.ndarray:
        return self.msm_g1_async(curve, self.upload_bases(bases), scalars).wait()

    def msm_g2(self, curve: str, bases: np.ndarray, scalars: np.ndarray) -> np.ndarray:
        return self.msm_g2_async(curve, self.upload_bases(bases), scalars).wait()

    # -- NTT -----------------------------------------------------------------------------

    def _const(self, c: CurveParams, v: int) -> Any:
        return self.cp.asarray(_fr_mont_const(c, v))

    def _tw(self, c: CurveParams, n: int, inverse: bool) -> Any:
        key = (c.name, n, inverse)
        t = self._twiddles.get(key)
        if t is None:
            w = root_of_unity(c, n.bit_length() - 1)
            if inverse:
                w = pow(w, -1, c.r)
            with self.device, self.stream:
                t = self.cp.empty((max(1, n // 2), 4), dtype=self.cp.uint64)
                g = self._const(c, w)
                self._launch(f"{c.name}_fr_k_powers", (n // 2 + 63) // 64, t, g, np.uint64(n // 2))
                self.stream.synchronize()
            self._twiddles[key] = t
        return t

    def _ntt_mont_dev(self, c: CurveParams, x: Any, n: int, inverse: bool) -> None:
        """In place, Montgomery form, on the stream: bit reversal then log2(n) stages."""
        logn = n.bit_length() - 1
        if n <= 1:
            return
        tw = self._tw(c, n, inverse)
        self._launch(f"{c.name}_fr_k_bitrev", n, x, np.uint64(n), np.int32(logn))
        m = 1
        while m < n:
            self._launch(f"{c.name}_fr_k_ntt_stage", n // 2, x, tw, np.uint64(n), np.uint64(m))
            m <<= 1

    @staticmethod
    def _check_domain(a: np.ndarray) -> int:
        n = int(a.shape[0])
        if a.ndim != 2 or a.shape[1] != 4 or n < 1 or n & (n - 1):
            raise ValueError("expected (n, 4) uint64 with n a power of two")
        return n

    def ntt_async(self, curve: str, a: np.ndarray, *, inverse: bool = False) -> PendingResult:
        c = get_curve(curve)
        n = self._check_domain(a)
        keep: list[Any] = []
        with self.device:
            x = self.upload(np.ascontiguousarray(a, dtype=np.uint64), keep)
            with self.stream:
                self._launch(f"{c.name}_fr_k_to_mont", n, x, np.uint64(n))
                self._ntt_mont_dev(c, x, n, inverse)
                if inverse:
                    s = self._const(c, pow(n, -1, c.r))
                    keep.append(s)
                    self._launch(f"{c.name}_fr_k_scale", n, x, s, np.uint64(n))
                self._launch(f"{c.name}_fr_k_from_mont", n, x, np.uint64(n))
            return self._finish(x, keep)

    def ntt(self, curve: str, a: np.ndarray, *, inverse: bool = False) -> np.ndarray:
        return self.ntt_async(curve, a, inverse=inverse).wait()

    def h_coset_dev(
        self,
        curve: str,
        a: np.ndarray,
        b: np.ndarray,
        c_: np.ndarray,
        shift: int | None,
        keep: list[Any],
    ) -> Any:
        """snarkjs's H evaluations left on the device (std form), ready for the H MSM."""
        from engine.prover.native import h_shift

        c = get_curve(curve)
        n = self._check_domain(a)
        if shift is None:
            shift = h_shift(c, n)
        with self.device:
            xs = [self.upload(np.ascontiguousarray(v, dtype=np.uint64), keep) for v in (a, b, c_)]
            with self.stream:
                pw = self.cp.empty((n, 4), dtype=self.cp.uint64)
                g, ninv = self._const(c, shift), self._const(c, pow(n, -1, c.r))
                self._launch(f"{c.name}_fr_k_powers", (n + 63) // 64, pw, g, np.uint64(n))
                self._launch(f"{c.name}_fr_k_scale", n, pw, ninv, np.uint64(n))  # fold in 1/n
                for x in xs:
                    self._launch(f"{c.name}_fr_k_to_mont", n, x, np.uint64(n))
                    self._ntt_mont_dev(c, x, n, True)
                    self._launch(f"{c.name}_fr_k_pointwise_mul", n, x, pw, np.uint64(n))
                    self._ntt_mont_dev(c, x, n, False)
                out = self.cp.empty((n, 4), dtype=self.cp.uint64)
                self._launch(f"{c.name}_fr_k_h_final", n, out, xs[0], xs[1], xs[2], np.uint64(n))
            keep += [pw, g, ninv, *xs]
        return out

    def h_coset_async(
        self, curve: str, a: np.ndarray, b: np.ndarray, c_: np.ndarray, shift: int | None = None
    ) -> PendingResult:
        keep: list[Any] = []
        out = self.h_coset_dev(curve, a, b, c_, shift, keep)
        with self.device:
            return self._finish(out, keep)

    def h_coset(self, curve: str, a: np.ndarray, b: np.ndarray, c_: np.ndarray, shift: int | None = None) -> np.ndarray:
        return self.h_coset_async(curve, a, b, c_, shift).wait()


_devices: dict[int, GpuDevice] = {}
_dev_lock = threading.Lock()


def get_device(index: int = 0) -> GpuDevice:
    """A process-wide GpuDevice per index (the module load and twiddles are reused)."""
    with _dev_lock:
        d = _devices.get(index)
        if d is None:
            d = _devices[index] = GpuDevice(index)
        return d


def cached_binary_path(arch: str = "sm_90") -> Path:
    ext = "ptx" if arch.startswith("compute_") else "cubin"
    return cache_dir() / "kernels" / f"gpu-{source_hash(arch)}" / f"kernels-{arch}.{ext}"
