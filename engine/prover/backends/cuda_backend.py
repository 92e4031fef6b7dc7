"""A CUDA device as a Backend (backends.base): the algorithms of cuda.Grid on one device's stream.

The key's bases are uploaded once per device and kept while the key lives; a launch uploads
the witness, leaves H on the device for its MSM and returns each MSM's handle while the
device works, so the engine's proving stage moves on and its finalizer waits. The device is
looked up at launch (cuda.get_device), so the tests run this very path on the host emulation
of the kernels (tests.prover.grid_emu).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.prover.backends import cuda
from engine.prover.backends.base import SECTIONS, Buffer, Evaluations, Handle

if TYPE_CHECKING:
    from engine.prover.keys import ProvingKey

_device_bases: weakref.WeakKeyDictionary[ProvingKey, dict[tuple[int, str], Any]] = weakref.WeakKeyDictionary()
_bases_lock = threading.Lock()


def bases_on(key: ProvingKey, dev: Any) -> dict[str, Any]:
    """The key's bases on ``dev``, uploaded on first use and kept while the key lives (None for
    a section without rows)."""
    with _bases_lock:
        per_key = _device_bases.setdefault(key, {})
        out: dict[str, Any] = {}
        for section in SECTIONS:
            arr = getattr(key, section)
            slot = (dev.index, section)
            if slot not in per_key and arr.shape[0]:
                per_key[slot] = dev.upload_bases(arr)
            out[section] = per_key.get(slot)
        return out


def _sections(key: ProvingKey) -> list[tuple[str, np.ndarray]]:
    """The key's sections that are uploaded (a section without rows is not)."""
    return [(section, getattr(key, section)) for section in SECTIONS if getattr(key, section).shape[0]]


def resident_bytes(key: ProvingKey) -> int:
    """The device bytes ``bases_on`` holds for the key on one device: its sections' arrays as
    uploaded (contiguous 64-bit words, what Grid.upload_bases makes of them)."""
    return sum(arr.shape[0] * arr.shape[1] * 8 for _, arr in _sections(key))


def drop_bases(key: ProvingKey, index: int) -> bool:
    """Forget the key's bases on device ``index`` (the device frees them once no launch still
    reads them); True when there were any."""
    with _bases_lock:
        per_key = _device_bases.get(key)
        if not per_key:
            return False
        slots = [slot for slot in per_key if slot[0] == index]
        for slot in slots:
            del per_key[slot]
        return bool(slots)


def has_bases(key: ProvingKey, index: int) -> bool:
    with _bases_lock:
        return any(slot[0] == index for slot in _device_bases.get(key, {}))


class CudaLaunch:
    """One proof's (or batch's) buffers on the device: what its kernels read until they finish."""

    asynchronous = True

    def __init__(self, dev: Any, key: ProvingKey) -> None:
        self.dev = dev
        self.curve = key.curve
        self.domain_size = key.domain_size
        self.bases = bases_on(key, dev)
        self.keep: list[Any] = []

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(x, "nbytes", 0) or 0) for x in self.keep)

    def h_coset(self, evals: Evaluations) -> Buffer:
        a, b, c = evals
        return self.dev.h_coset_dev(self.curve, a, b, c, None, self.keep)

    def h_coset_batch(self, evals: Iterable[Evaluations], k: int) -> Buffer:
        return self.dev.h_coset_batch_dev(self.curve, self.domain_size, evals, k, self.keep)

    def _upload(self, host: np.ndarray) -> Any:
        on_device = self.dev.upload(host, self.keep)
        self.keep.append(on_device)
        return on_device

    def scalars(self, witness: Buffer) -> Buffer:
        return self._upload(witness if isinstance(witness, cuda.Pinned) else np.asarray(witness))

    def scalars_batch(self, witnesses: Sequence[Buffer]) -> Buffer:
        if witnesses and all(isinstance(w, cuda.Pinned) for w in witnesses) and self.dev.xp is not np:
            # staged rows copied straight into one device array: no host stacking in the lock
            with self.dev.device:
                out = self.dev.xp.empty((len(witnesses), *witnesses[0].shape), dtype=np.uint64)
                for v, w in enumerate(witnesses):
                    out[v].set(w, stream=self.dev.stream)
            self.keep += [*witnesses, out]
            return out
        return self._upload(np.stack([np.asarray(w) for w in witnesses]))

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle:
        run = self.dev.msm_g1_async if SECTIONS[section] == "g1" else self.dev.msm_g2_async
        handle: Handle = run(self.curve, self.bases[section], scalars[first_row:])
        return handle

    def msm_batch(self, section: str, scalars: Buffer, first_row: int = 0) -> list[Handle]:
        # the vector is part of each bucket id: one sort, accumulation and reduction for all k
        run = self.dev.msm_g1_batch_async if SECTIONS[section] == "g1" else self.dev.msm_g2_batch_async
        return list(run(self.curve, self.bases[section], scalars[:, first_row:]))

    def close(self) -> None:
        self.keep.clear()


class CudaBackend:
    def __init__(self, index: int) -> None:
        self.index = index
        self.name = f"cuda:{index}"

    def stage(self, buffer: Buffer) -> Buffer:
        """Host memory the device copies ``buffer`` from (pinned on a GPU), filled now: before
        the launch, outside the device's lock."""
        return cuda.get_device(self.index).stage(buffer)

    def launch(self, key: ProvingKey) -> CudaLaunch:
        return CudaLaunch(cuda.get_device(self.index), key)
