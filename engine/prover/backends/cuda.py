"""The arithmetic kernels on an NVIDIA GPU: the same C sources as engine.prover.backends.cpu.native,
compiled by NVRTC (through CuPy's bindings) and launched on a CuPy stream.

* ``compile_for_arch("sm_90")`` builds everything without a device (NVRTC needs no driver),
  caching the binary in the project cache keyed by a source hash; CI uses it to catch a
  GPU build break on machines with no GPU.
* ``gpu_available()`` never raises.
* ``Grid`` holds the algorithms (MSM, NTT, H on the coset) as sequences of kernel launches
  and array steps written once against an array module: ``GpuDevice`` runs them with CuPy on
  a device, ``tests.prover.grid_emu.EmulatedGrid`` with numpy and the same kernel bodies
  compiled for the host, so the tests check the GPU's algorithms on machines without one.
* ``msm_g1_async`` / ``msm_g2_async`` / ``ntt_async`` / ``h_coset_async`` enqueue work and
  return a ``PendingResult`` at once; ``.wait()`` blocks and returns the numpy result. Host
  buffers for transfers are pinned so copies run at full PCIe speed and overlap with kernels.

MSM (kernels/msm_gpu.h): signed c-bit digits as packed 64-bit keys, one device sort, bucket
sums by chunks of at most ``CHUNK`` entries and a segmented tree over the partial sums (so a
bucket holding most points, as witness scalars make one, is summed by many threads), bucket
reduction by segments and a tree to one sum per window; on the host, the window sums to
affine and weighed by 2^(c w) as an MSM of a few points. ``msm_g1_batch_async`` /
``msm_g2_batch_async`` run k scalar vectors over the same bases as one such sequence: the
vector is part of each bucket id, so one sort, one accumulation and one reduction serve all k.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.prover.backends.cpu import native
from engine.prover.backends.cpu.native_build import KERNEL_DIR, SHARED_KERNEL_FILES, cache_dir, params_prelude
from engine.prover.backends.driver import NO_DRIVER, nvidia_driver_present
from engine.prover.params.curves import CurveParams, fp_to_limbs, fr_to_limbs, get_curve, limbs_to_ints, root_of_unity

GPU_KERNEL_FILES = (*SHARED_KERNEL_FILES, "ntt_gpu.h", "poseidon_gpu.h", "msm_gpu.h", "gpu.cu")
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


def sources_digest(source: str, options: list[str]) -> str:
    """A build of the GPU kernels' key: every kernel file, the generated source and the
    compiler's options (the NVRTC build's, and the host emulation's in grid_emu)."""
    h = hashlib.sha256()
    for name in GPU_KERNEL_FILES:
        h.update(name.encode())
        h.update((KERNEL_DIR / name).read_bytes())
    h.update(source.encode())
    h.update(repr(options).encode())
    return h.hexdigest()[:16]


def source_hash(arch: str) -> str:
    # the include path names this checkout; the sources under it are hashed, so a cache copied
    # to another checkout (or machine) is still found
    return sources_digest(kernel_source(), [o for o in nvrtc_options(arch) if not o.startswith("-I")])


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


# The MSM's settings, the fastest of a sweep on an H200 at 2^20 (bench/results/gpu.md, "MSM
# setting"): chunks of 8 or 16 entries beat 32 by 5-10 %, c = log2(n) - 5 beat - 3 by 13 %,
# and 32768 reduction threads beat 8192 by 6 %.
CHUNK = 8  # entries one thread sums per bucket chunk and per level of the tree
SEGMENTS = 1 << 15  # threads of the bucket reduction, over all windows
BUCKET_IDS = (1 << 32) - 1  # bucket ids a key's 32 bits give a launch sequence (0xffffffff: zero digit)


def msm_window_gpu(n: int, bias: int = 5, cap: int = 20) -> int:
    """The window c: total work is about nwin n mixed additions plus 3 nwin 2^(c-1) for the
    buckets, least near c = log2(n) - 5 (``bias``) as measured; ``cap`` bounds the bucket
    tables (nwin 2^(c-1) buckets must fit a key's 32 bucket bits: c = 20 uses 2^23)."""
    lg = max(n, 1).bit_length() - 1
    return max(4, min(cap, lg - bias))


def kernel_names() -> list[str]:
    """Every kernel the GPU module exports, read from their definitions (``KERNEL FN(k_…)`` in
    ntt_gpu.h and poseidon_gpu.h for each curve's Fr, ``KERNEL CN(k_…)`` in msm_gpu.h for each
    curve's G1 and G2), so a kernel added there is launched, checked and listed without a second
    list to update."""
    fr = [name for header in ("ntt_gpu.h", "poseidon_gpu.h")
          for name in re.findall(r"^KERNEL FN\((k_\w+)\)", (KERNEL_DIR / header).read_text(), re.MULTILINE)]
    group = re.findall(r"^KERNEL CN\((k_\w+)\)", (KERNEL_DIR / "msm_gpu.h").read_text(), re.MULTILINE)
    names: list[str] = []
    for curve in ("bn128", "bls12381"):
        names += [f"{curve}_fr_{k}" for k in fr]
        names += [f"{curve}_{g}_{k}" for g in ("g1", "g2") for k in group]
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
        if not nvidia_driver_present():
            return NO_DRIVER  # not CUDA's "driver version is insufficient", which reads like a driver fault
        return f"no usable GPU: {type(e).__name__}: {e}"


@dataclass
class PendingResult:
    """Work enqueued on a stream; ``wait()`` blocks until it finished and returns the result
    (``post`` turns the downloaded array into it on the host)."""

    event: Any  # None where the work is already done (the emulated grid)
    host: np.ndarray  # pinned buffer the result is copied into
    shape: tuple[int, ...]
    keep: list[Any] = field(default_factory=list)  # buffers that must outlive the kernels
    post: Callable[[np.ndarray], np.ndarray] | None = None
    _value: np.ndarray | None = None

    def done(self) -> bool:
        return self.event is None or bool(self.event.done)

    def wait(self) -> np.ndarray:
        if self._value is None:
            if self.event is not None:
                self.event.synchronize()
            value = np.array(self.host.reshape(self.shape), copy=True)
            self._value = self.post(value) if self.post is not None else value
            self.keep.clear()
        return self._value


@dataclass(eq=False)
class PendingRow:
    """One vector's share of a batched MSM: row ``index`` of the batch's result (the batch is
    waited for, and turned into points, once for all its rows)."""

    whole: PendingResult
    index: int

    def done(self) -> bool:
        return self.whole.done()

    def wait(self) -> np.ndarray:
        return self.whole.wait()[self.index]


def _fr_mont_const(c: CurveParams, v: int) -> np.ndarray:
    m = (v % c.r) * c.fr_r % c.r
    return np.frombuffer(m.to_bytes(32, "little"), dtype="<u8").astype(np.uint64)


def _window_weights(c: CurveParams, cw: int, nwin: int) -> np.ndarray:
    """2^(c w) mod r for each window w: the host's last step is the MSM of the window sums
    with these (reduction mod r changes nothing on points of order r)."""
    return fr_to_limbs([pow(2, cw * w, c.r) for w in range(nwin)])


def xyzz_to_affine(c: CurveParams, points: np.ndarray, ext: int) -> np.ndarray:
    """XYZZ points (Montgomery limbs, coordinates in Fp or, ext = 2, Fp2 = Fp[u]/(u^2 + 1)) to
    affine (x = X/ZZ, y = Y/ZZZ; the point at infinity, ZZ = 0, to zeros) on the host: a few
    window sums, where one GPU thread's inversion took milliseconds."""
    p, R = c.p, c.fp_r
    rinv = pow(R, -1, p)
    L = c.fp_limbs
    vals = [v * rinv % p for v in limbs_to_ints(points.reshape(-1, L))]
    out: list[int] = []
    for i in range(0, len(vals), 4 * ext):
        X, Y, ZZ, ZZZ = (tuple(vals[i + k * ext : i + (k + 1) * ext]) for k in range(4))
        if not any(ZZ):
            out += [0] * (2 * ext)
            continue
        for num, den in ((X, ZZ), (Y, ZZZ)):
            if ext == 1:
                out.append(num[0] * pow(den[0], -1, p) * R % p)
            else:  # (a + b u) / (d + e u) = (a + b u)(d - e u) / (d^2 + e^2)
                (a, b), (d, e) = num, den
                inv = pow(d * d + e * e, -1, p)
                out += [(a * d + b * e) * inv * R % p, (b * d - a * e) * inv * R % p]
    return fp_to_limbs(out, c).reshape(points.shape[0], 2 * ext * L)


class Pinned(np.ndarray):
    """Host memory a device copies from directly (page-locked): what GpuDevice.stage makes, so
    the copy into it happens before a launch, outside the device's lock."""


class Grid:
    """The GPU's algorithms over an array module (``xp``) and a kernel launcher. A subclass
    provides ``xp``, ``_launch``, ``upload``, ``_finish`` and ``_on`` (the context its array
    steps run in). Use from one thread at a time (the engine's GPU workers hold a per-device
    lock)."""

    xp: Any
    index: int = 0

    def __init__(self) -> None:
        self._twiddles: dict[tuple[str, int, bool], Any] = {}
        # the MSM's tuning, per grid so a benchmark can sweep it
        self.chunk = CHUNK
        self.segments = SEGMENTS
        self.window: Callable[[int], int] = msm_window_gpu
        self.bucket_ids = BUCKET_IDS  # a batch is split where its buckets would pass it

    def _mark(self, label: str) -> None:
        """A point between an algorithm's steps, for a grid that times them (GpuDevice.trace)."""

    def _launch(self, name: str, threads: int, *args: Any) -> None:
        raise NotImplementedError

    def upload(self, arr: np.ndarray, keep: list[Any] | None = None) -> Any:
        raise NotImplementedError

    def stage(self, arr: Any) -> np.ndarray:
        """``arr`` where an upload reads it from: host work, done before a launch."""
        return np.ascontiguousarray(arr, dtype=np.uint64)

    def _finish(self, dev: Any, keep: list[Any], post: Callable[[np.ndarray], np.ndarray] | None = None) -> PendingResult:
        raise NotImplementedError

    def _on(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def synchronize(self) -> None:
        """Waits for every launch so far (nothing to wait for where launches are synchronous)."""

    # -- MSM -----------------------------------------------------------------------------

    def upload_bases(self, bases: np.ndarray) -> Any:
        """Bases (n, 2L or 4L) affine Montgomery to the device, once per proving key."""
        return self.upload(np.ascontiguousarray(bases, dtype=np.uint64))

    def _segmented_sum(self, pre: str, off: Any, nseg: int, most: int, bound: int,
                       first: tuple[str, Any] | None, items: Any, xz_width: int) -> tuple[Any, Any]:
        """Sums each segment's items (segment b: items off[b] .. off[b+1] - 1), ``chunk`` at a time,
        level after level, until at most one partial sum is left per segment. ``most`` bounds
        a segment's length and ``bound`` the number of items; ``first`` names the kernel of the
        first level and its extra input where it differs (the affine bases). Returns the sums
        and their offsets (an empty segment keeps an empty range)."""
        xp, k = self.xp, self.chunk
        level = 0
        while level == 0 or most > 1:
            chunks = xp.zeros(nseg + 1, dtype=xp.int64)
            xp.cumsum((off[1:] - off[:-1] + (k - 1)) // k, out=chunks[1:])
            bound = (bound + k - 1) // k + nseg
            out = xp.empty((bound, xz_width), dtype=xp.uint64)
            if level == 0 and first is not None:
                kernel, bases = first
                self._launch(kernel, bound, out, bases, items, off, chunks, np.uint64(nseg), np.uint64(k))
            else:
                self._launch(f"{pre}_k_acc_xyzz", bound, out, items, off, chunks, np.uint64(nseg), np.uint64(k))
            items, off = out, chunks
            most = (most + k - 1) // k
            level += 1
        return items, off

    def _msm_width(self, curve: str, group: str, bases_dev: Any) -> tuple[CurveParams, int, int]:
        c = get_curve(curve)
        width = (2 if group == "g1" else 4) * c.fp_limbs
        n = int(bases_dev.shape[0])
        if bases_dev.ndim != 2 or bases_dev.shape[1] != width:
            raise ValueError(f"bases: expected (n, {width}) on the device")
        if n >= 1 << 31:
            raise ValueError("at most 2^31 - 1 points")  # a key's entry field holds the base's index
        return c, width, n

    def batch_limit(self, n: int) -> int:
        """The most vectors one launch sequence takes over n bases: their k nwin half bucket
        ids share a key's 32 bucket bits, 0xffffffff being a zero digit's."""
        cw = self.window(n)
        return max(1, self.bucket_ids // (((256 + cw) // cw) << (cw - 1)))

    def _msm_launch(self, c: CurveParams, group: str, bases_dev: Any, sc: Any, k: int, keep: list[Any], *,
                    single: bool = False) -> PendingResult:
        """One launch sequence for k vectors (sc: (k n, 4) on the device); the result (k, width),
        or (width,) for a ``single`` vector."""
        xp = self.xp
        n = int(bases_dev.shape[0])
        pre = f"{c.name}_{group}"
        cw = self.window(n)  # a vector's buckets are its own: each costs what a single MSM does
        nwin = (256 + cw) // cw
        half = 1 << (cw - 1)
        kw = k * nwin  # vector v's window w is window v nwin + w of the batch
        nb = kw * half
        keys = xp.empty(kw * n, dtype=xp.uint64)
        self._mark("upload")
        self._launch(f"{pre}_k_digits", k * n, keys, sc, np.uint64(n), np.uint64(k), np.int32(cw), np.int32(nwin))
        self._mark("digits")
        keys.sort()
        self._mark("sort")
        starts = xp.searchsorted(keys, xp.arange(nb + 1, dtype=xp.uint64) << xp.uint64(32)).astype(xp.int64)
        self._mark("bucket offsets")
        xz = 2 * int(bases_dev.shape[1])
        # a bucket holds at most one entry per base: n bounds it whatever k
        buckets, boff = self._segmented_sum(pre, starts, nb, n, kw * n, (f"{pre}_k_acc_affine", bases_dev), keys, xz)
        self._mark("bucket sums")
        S = max(1, min(half, self.segments // kw))
        seg = xp.empty((kw * S, xz), dtype=xp.uint64)
        self._launch(f"{pre}_k_segments", kw * S, seg, buckets, boff, np.uint64(half), np.int32(kw), np.uint64(S))
        self._mark("bucket reduction")
        sums, _ = self._segmented_sum(pre, xp.arange(kw + 1, dtype=xp.int64) * S, kw, S, kw * S, None, seg, xz)
        windows = xp.ascontiguousarray(sums[:kw])  # every window has segments, so sum w is item w
        self._mark("window sums")
        keep += [keys, starts, buckets, boff, seg, sums, sc]
        weights = _window_weights(c, cw, nwin)
        msm_host = getattr(native, f"msm_{group}")
        ext = 1 if group == "g1" else 2

        def post(w: np.ndarray) -> np.ndarray:
            aff = xyzz_to_affine(c, w, ext).reshape(k, nwin, -1)
            points = [msm_host(c.name, aff[v], weights) for v in range(k)]
            return points[0] if single else np.stack(points)

        return self._finish(windows, keep, post)

    def _msm_async(self, curve: str, group: str, bases_dev: Any, scalars: Any) -> PendingResult:
        c, _, n = self._msm_width(curve, group, bases_dev)
        keep: list[Any] = []
        with self._on():
            if isinstance(scalars, np.ndarray):
                if scalars.shape != (n, 4) or scalars.dtype != np.uint64:
                    raise ValueError("scalars: expected (n, 4) uint64")
                sc = self.upload(scalars, keep)
            else:
                sc = self.xp.ascontiguousarray(scalars, dtype=self.xp.uint64)
            return self._msm_launch(c, group, bases_dev, sc, 1, keep, single=True)  # a batch of one

    def _msm_batch_async(self, curve: str, group: str, bases_dev: Any, scalars: Any) -> list[PendingRow]:
        c, _, n = self._msm_width(curve, group, bases_dev)
        on_host = not isinstance(scalars, self.xp.ndarray)  # (numpy arrays are the emulation's device arrays)
        with self._on():
            sc = np.asarray(scalars) if on_host else self.xp.ascontiguousarray(scalars, dtype=self.xp.uint64)
            if sc.ndim != 3 or tuple(sc.shape[1:]) != (n, 4) or sc.dtype != np.uint64:
                raise ValueError(f"scalars: expected (k, {n}, 4) uint64")
            k, step = int(sc.shape[0]), self.batch_limit(n)
            rows: list[PendingRow] = []
            for lo in range(0, k, step):
                g = min(step, k - lo)
                keep: list[Any] = []
                part = sc[lo : lo + g].reshape(g * n, 4)
                if on_host:
                    part = self.upload(part, keep)
                whole = self._msm_launch(c, group, bases_dev, part, g, keep)
                rows += [PendingRow(whole, v) for v in range(g)]
        return rows

    def msm_g1_async(self, curve: str, bases_dev: Any, scalars: Any) -> PendingResult:
        return self._msm_async(curve, "g1", bases_dev, scalars)

    def msm_g2_async(self, curve: str, bases_dev: Any, scalars: Any) -> PendingResult:
        return self._msm_async(curve, "g2", bases_dev, scalars)

    def msm_g1_batch_async(self, curve: str, bases_dev: Any, scalars: Any) -> list[PendingRow]:
        """k MSMs over the same bases (scalars (k, n, 4), host or device) in one launch sequence
        (several where k passes ``batch_limit``): one pending result per vector."""
        return self._msm_batch_async(curve, "g1", bases_dev, scalars)

    def msm_g2_batch_async(self, curve: str, bases_dev: Any, scalars: Any) -> list[PendingRow]:
        return self._msm_batch_async(curve, "g2", bases_dev, scalars)

    def msm_g1(self, curve: str, bases: np.ndarray, scalars: np.ndarray) -> np.ndarray:
        return self.msm_g1_async(curve, self.upload_bases(bases), scalars).wait()

    def msm_g2(self, curve: str, bases: np.ndarray, scalars: np.ndarray) -> np.ndarray:
        return self.msm_g2_async(curve, self.upload_bases(bases), scalars).wait()

    # -- NTT -----------------------------------------------------------------------------

    def _const(self, c: CurveParams, v: int) -> Any:
        return self.xp.asarray(_fr_mont_const(c, v))

    def _tw(self, c: CurveParams, n: int, inverse: bool) -> Any:
        key = (c.name, n, inverse)
        t = self._twiddles.get(key)
        if t is None:
            w = root_of_unity(c, n.bit_length() - 1)
            if inverse:
                w = pow(w, -1, c.r)
            with self._on():
                t = self.xp.empty((max(1, n // 2), 4), dtype=self.xp.uint64)
                g = self._const(c, w)
                self._launch(f"{c.name}_fr_k_powers", (n // 2 + 63) // 64, t, g, np.uint64(n // 2))
                self.synchronize()
            self._twiddles[key] = t
        return t

    def _ntt_mont_dev(self, c: CurveParams, x: Any, n: int, inverse: bool) -> None:
        """In place, Montgomery form, on the stream: bit reversal then log2(n) stages, two a launch."""
        logn = n.bit_length() - 1
        if n <= 1:
            return
        tw = self._tw(c, n, inverse)
        self._launch(f"{c.name}_fr_k_bitrev", n, x, np.uint64(n), np.int32(logn))
        m = 1
        while 4 * m <= n:  # two stages a launch while two remain
            self._launch(f"{c.name}_fr_k_ntt_stage2", n // 4, x, tw, np.uint64(n), np.uint64(m))
            m <<= 2
        if m < n:
            self._launch(f"{c.name}_fr_k_ntt_stage", n // 2, x, tw, np.uint64(n), np.uint64(m))

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
        with self._on():
            x = self.upload(np.ascontiguousarray(a, dtype=np.uint64), keep)
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
        out: Any = None,
    ) -> Any:
        """snarkjs's H evaluations left on the device (std form), ready for the H MSM; into
        ``out`` (an (n, 4) device array) when given."""
        c = get_curve(curve)
        n = self._check_domain(a)
        if shift is None:
            shift = native.h_shift(c, n)
        with self._on():
            xs = [self.upload(v if isinstance(v, Pinned) else np.ascontiguousarray(v, dtype=np.uint64), keep)
                  for v in (a, b, c_)]
            pw = self.xp.empty((n, 4), dtype=self.xp.uint64)
            g, ninv = self._const(c, shift), self._const(c, pow(n, -1, c.r))
            self._launch(f"{c.name}_fr_k_powers", (n + 63) // 64, pw, g, np.uint64(n))
            self._launch(f"{c.name}_fr_k_scale", n, pw, ninv, np.uint64(n))  # fold in 1/n
            for x in xs:
                self._launch(f"{c.name}_fr_k_to_mont", n, x, np.uint64(n))
                self._ntt_mont_dev(c, x, n, True)
                self._launch(f"{c.name}_fr_k_pointwise_mul", n, x, pw, np.uint64(n))
                self._ntt_mont_dev(c, x, n, False)
            if out is None:
                out = self.xp.empty((n, 4), dtype=self.xp.uint64)
            self._launch(f"{c.name}_fr_k_h_final", n, out, xs[0], xs[1], xs[2], np.uint64(n))
            keep += [pw, g, ninv, *xs]
        return out

    def h_coset_batch_dev(self, curve: str, n: int, evals: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]],
                          k: int, keep: list[Any]) -> Any:
        """The H evaluations of k proofs over one domain of n rows, as one (k, n, 4) device array
        (the scalars of a batched H MSM); ``evals`` gives each proof's a, b, c in turn, so the
        caller need hold only one proof's on the host."""
        with self._on():
            out = self.xp.empty((k, n, 4), dtype=self.xp.uint64)
        for v, (a, b, c_) in enumerate(evals):
            self.h_coset_dev(curve, a, b, c_, None, keep, out=out[v])
        keep.append(out)
        return out

    def h_coset_async(
        self, curve: str, a: np.ndarray, b: np.ndarray, c_: np.ndarray, shift: int | None = None
    ) -> PendingResult:
        keep: list[Any] = []
        out = self.h_coset_dev(curve, a, b, c_, shift, keep)
        with self._on():
            return self._finish(out, keep)

    def h_coset(self, curve: str, a: np.ndarray, b: np.ndarray, c_: np.ndarray, shift: int | None = None) -> np.ndarray:
        return self.h_coset_async(curve, a, b, c_, shift).wait()


class GpuDevice(Grid):
    """One GPU: the loaded kernels, a stream, cached twiddles."""

    def __init__(self, index: int = 0) -> None:
        import cupy

        super().__init__()
        self.cp = self.xp = cupy
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
        self.trace: list[tuple[str, Any]] | None = None  # a list to record (step, CUDA event) into

    def _mark(self, label: str) -> None:
        if self.trace is not None:
            ev = self.cp.cuda.Event()
            ev.record(self.stream)
            self.trace.append((label, ev))

    def name(self) -> str:
        props = self.cp.cuda.runtime.getDeviceProperties(self.index)
        n = props["name"]
        return n.decode() if isinstance(n, bytes) else str(n)

    def _fn(self, name: str) -> Any:
        f = self._fns.get(name)
        if f is None:
            f = self._fns[name] = self.module.get_function(name)
        return f

    def _on(self) -> AbstractContextManager[Any]:
        # CuPy's array steps (sort, cumsum ...) and RawKernel launches both go to the current
        # stream: make ours current, on our device
        stack = ExitStack()
        stack.enter_context(self.device)
        stack.enter_context(self.stream)
        return stack

    def _launch(self, name: str, threads: int, *args: Any) -> None:
        if threads <= 0:
            return
        grid = (threads + BLOCK - 1) // BLOCK
        with self.device, self.stream:
            self._fn(name)((grid,), (BLOCK,), args)

    def pinned(self, shape: tuple[int, ...], dtype: Any = np.uint64) -> np.ndarray:
        count = int(np.prod(shape))
        mem = self.cp.cuda.alloc_pinned_memory(max(1, count * np.dtype(dtype).itemsize))
        return np.frombuffer(mem, dtype, count).reshape(shape)

    def stage(self, arr: Any) -> np.ndarray:
        """A pinned copy of ``arr``, made now: its upload is then a copy by the device alone."""
        a = np.ascontiguousarray(arr)
        with self.device:
            stage = self.pinned(a.shape, a.dtype)
        stage[...] = a
        return stage.view(Pinned)

    def upload(self, arr: np.ndarray, keep: list[Any] | None = None) -> Any:
        """Async host->device copy through a pinned staging buffer (``arr`` itself where it is
        one: GpuDevice.stage's)."""
        a = arr if isinstance(arr, Pinned) else np.ascontiguousarray(arr)
        with self.device:
            stage: np.ndarray = a
            if not isinstance(a, Pinned):
                stage = self.pinned(a.shape, a.dtype)
                stage[...] = a
            dev = self.cp.empty(a.shape, dtype=a.dtype)
            dev.set(stage, stream=self.stream)
        if keep is not None:
            keep.append(stage)
        else:
            self.stream.synchronize()
        return dev

    def _finish(self, dev: Any, keep: list[Any], post: Callable[[np.ndarray], np.ndarray] | None = None) -> PendingResult:
        host = self.pinned(tuple(dev.shape), dev.dtype)
        dev.get(stream=self.stream, out=host, blocking=False)
        ev = self.cp.cuda.Event(block=False, disable_timing=True)
        ev.record(self.stream)
        keep.append(dev)
        return PendingResult(ev, host, tuple(dev.shape), keep, post)

    def synchronize(self) -> None:
        self.stream.synchronize()


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
