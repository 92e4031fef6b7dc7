"""The device memory budget: what the engine holds on each CUDA device is reserved there first.

One MemoryManager per device (engine.pipeline.memory, the host budget's class), holding

* a key's resident bases (``key:<circuit>``, the exact bytes of its sections as uploaded):
  reserved before the first launch of that key on the device, given back when the host's key
  cache drops the key (``key_dropped``) or when the device is short and no partition of the
  key is in flight there (this budget's evictor drops the bases themselves too);
* each launch's working memory (the partition's owner, as on the host): reserved before
  gpu_prove_start, from engine.circuits.sizing.device_launch_bytes, and given back share by
  share as the finalizer finishes each proof of the launch.

A proof that could never fit beside its own key fails at once (other keys' bases are
evictable; its own key is not while it proves). On "cpu" nothing is reserved here. The
bases' calls are injected (``BasesOps``): the engine's are engine.prover.backends.cuda_backend's,
imported only where a CUDA device proves, so a CPU host loads no array library for this.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.circuits.sizing import DeviceLaunchBytes, device_launch_needs
from engine.env import parse_size
from engine.format import fmt_bytes
from engine.pipeline.memory import MemoryBudgetError, MemoryManager, Reservation
from engine.status.holdings import key_owner


class BasesOps(Protocol):
    """What this budget asks of the backend about a key's bases on a device."""

    def resident_bytes(self, key: Any) -> int: ...

    def drop_bases(self, key: Any, index: int) -> bool: ...

    def launch_bytes(self, key: Any, k: int) -> int: ...


class CudaBases:
    """The CUDA backend's bases (engine.prover.backends.cuda_backend), imported on first use."""

    def resident_bytes(self, key: Any) -> int:
        from engine.prover.backends import cuda_backend

        return cuda_backend.resident_bytes(key)

    def drop_bases(self, key: Any, index: int) -> bool:
        from engine.prover.backends import cuda_backend

        return cuda_backend.drop_bases(key, index)

    def launch_bytes(self, key: Any, k: int) -> int:
        return launch_bytes(key, k)


def launch_needs(key: Any, k: int = 1) -> DeviceLaunchBytes:
    """What a launch of ``k`` proofs of ``key`` (a ProvingKey) holds on a device until finished,
    beside the key's bases: the MSMs cuda_backend.CudaLaunch runs (C only with private signals)."""
    from engine.prover.backends.base import SECTIONS

    msms = [(int(getattr(key, s).shape[0]), int(getattr(key, s).shape[1])) for s in SECTIONS
            if s != "c_points" or key.n_private]
    return device_launch_needs(int(key.domain_size), int(key.n_vars), msms, k)


def launch_bytes(key: Any, k: int = 1) -> int:
    return launch_needs(key, k).total


def device_budget_bytes(budget: str, margin: str, total: int | None) -> int:
    """``auto`` = the device's total memory (as engine.pipeline.devices reports it) less the
    margin; otherwise a size such as 70GiB."""
    if budget.strip().lower() != "auto":
        return parse_size(budget)
    if total is None:
        raise MemoryBudgetError("the device's total memory is unknown: set PROVINGSITE_DEVICE_MEMORY_BUDGET to a size")
    return max(total - parse_size(margin), 0)


def device_index(device: str) -> int:
    return int(device.split(":", 1)[1])


@dataclass
class _Resident:
    key: weakref.ref[Any]
    reservation: Reservation
    last_used: float = field(default_factory=time.monotonic)


class DeviceHold:
    """One launch's working memory on a device, shared by its proofs (one, or a batch's k):
    each finished proof gives back its share, the last one the rest and the key's use."""

    def __init__(self, owner: DeviceMemory, slot: tuple[str, str], reservation: Reservation, members: int,
                 keep_bases: bool = True) -> None:
        self._memory = owner
        self.slot = slot
        self.keep_bases = keep_bases
        self.reservation = reservation
        self.left = members
        self._share = reservation.nbytes // members
        self._lock = threading.Lock()

    def finish_one(self) -> None:
        with self._lock:
            if self.left == 0:
                return
            self.left -= 1
            last = self.left == 0
        if last:
            self.reservation.release()
            self._memory._not_in_use(self.slot)
            if not self.keep_bases:
                self._memory._let_go_if_idle(self.slot)
        else:
            self.reservation.release_part(self._share)


class DeviceMemory:
    """``budgets``: device name → bytes. ``on_change`` runs after every reservation or release
    on any device (outside the managers' locks): the engine writes the new holdings then."""

    def __init__(self, budgets: dict[str, int], on_change: Callable[[], None] | None = None,
                 ops: BasesOps | None = None) -> None:
        self.managers = {device: MemoryManager(nbytes) for device, nbytes in budgets.items()}
        self.ops: BasesOps = ops if ops is not None else CudaBases()
        self._lock = threading.Lock()
        self._resident: dict[tuple[str, str], _Resident] = {}
        self._in_use: Counter[tuple[str, str]] = Counter()
        self._holds: dict[int, DeviceHold] = {}  # partition id → its launch's hold
        self._loading = {device: threading.Lock() for device in budgets}  # one upload reservation at a time
        for device, manager in self.managers.items():
            manager.add_evictor(functools.partial(self.evict, device))
            if on_change is not None:
                manager.watch(lambda owner: True, on_change)

    # -- a launch ------------------------------------------------------------------------

    def hold(self, device: str, circuit_id: str, key: Any, owner: str, partitions: Sequence[int],
             cancelled: Callable[[], bool] | None = None, keep_bases: bool = True) -> DeviceHold | None:
        """Reserve the key's bases on ``device`` (if not yet resident) and the launch's working
        memory for ``partitions`` (one proof, or a batch's), blocking until they fit; None on a
        device without a budget (the CPU). MemoryBudgetError at once if they never can.
        ``keep_bases`` False: a key no cache keeps (a client's own zkey, read per job), whose
        bases are let go once no launch of it is left on the device."""
        manager = self.managers.get(device)
        if manager is None:
            return None
        k = len(partitions)
        work, resident = self.ops.launch_bytes(key, k), self.ops.resident_bytes(key)
        if work + resident > manager.budget:
            raise MemoryBudgetError(
                f"{owner}: a launch of {k} proof(s) of {circuit_id} needs {fmt_bytes(work)} on {device} beside its "
                f"key's bases of {fmt_bytes(resident)}, more than the device's whole budget of "
                f"{fmt_bytes(manager.budget)}; raise PROVINGSITE_DEVICE_MEMORY_BUDGET or prove smaller partitions")
        slot = (device, circuit_id)
        with self._lock:
            self._in_use[slot] += 1  # before reserving: the evictor must not take this key's bases now
        try:
            self._make_resident(manager, slot, key, resident, cancelled)
            reservation = manager.acquire(owner, work, cancelled=cancelled)
        except BaseException:
            self._not_in_use(slot)
            raise
        held = DeviceHold(self, slot, reservation, k, keep_bases)
        with self._lock:
            for partition in partitions:
                self._holds[partition] = held
        return held

    def finished(self, partition: int) -> None:
        """The finalizer is done with ``partition`` (proved, failed or dropped): its share of its
        launch's memory is given back. Idempotent; nothing for a partition never held here."""
        with self._lock:
            held = self._holds.pop(partition, None)
        if held is not None:
            held.finish_one()

    def _make_resident(self, manager: MemoryManager, slot: tuple[str, str], key: Any, nbytes: int,
                       cancelled: Callable[[], bool] | None) -> None:
        if self._touch(slot, key):
            return
        # One key's reservation at a time per device (two workers missing the same key reserve
        # it once); a launch of a key already resident does not wait behind it (checked above).
        with self._loading[slot[0]]:
            if self._touch(slot, key):
                return
            with self._lock:
                stale = self._resident.get(slot)
            if stale is not None:  # the host reloaded the circuit's key: the old object's bases are stale
                self._forget(slot, stale)
            reservation = manager.acquire(key_owner(slot[1]), nbytes, priority=0, cancelled=cancelled)
            with self._lock:
                self._resident[slot] = _Resident(weakref.ref(key), reservation)

    def _touch(self, slot: tuple[str, str], key: Any) -> bool:
        """True (and now the most recently used) when ``key``'s bases are resident in ``slot``."""
        with self._lock:
            entry = self._resident.get(slot)
            if entry is None or entry.key() is not key:
                return False
            entry.last_used = time.monotonic()
            return True

    def _not_in_use(self, slot: tuple[str, str]) -> None:
        with self._lock:
            self._in_use[slot] -= 1
            if self._in_use[slot] <= 0:
                del self._in_use[slot]

    # -- giving bases back -----------------------------------------------------------------

    def key_dropped(self, circuit_id: str) -> None:
        """The host's key cache no longer holds ``circuit_id``'s key (the hook it calls): its
        bases are dropped on every device and their reservations given back."""
        with self._lock:
            gone = [(slot, self._resident.pop(slot)) for slot in list(self._resident) if slot[1] == circuit_id]
        for slot, entry in gone:
            self._release(slot, entry)

    def evict(self, device: str, needed: int) -> int:
        """The device is short: drop the bases of keys no launch on it is using, least recently
        used first, until ``needed`` bytes are freed; returns the bytes freed."""
        gone: list[tuple[tuple[str, str], _Resident]] = []
        freed = 0
        with self._lock:
            idle = sorted(((slot, entry) for slot, entry in self._resident.items()
                           if slot[0] == device and not self._in_use[slot]), key=lambda pair: pair[1].last_used)
            for slot, entry in idle:
                if freed >= needed:
                    break
                del self._resident[slot]
                gone.append((slot, entry))
                freed += entry.reservation.nbytes
        for slot, entry in gone:
            self._release(slot, entry)
        return freed

    def _let_go_if_idle(self, slot: tuple[str, str]) -> None:
        with self._lock:
            entry = None if self._in_use[slot] else self._resident.pop(slot, None)
        if entry is not None:
            self._release(slot, entry)

    def _forget(self, slot: tuple[str, str], entry: _Resident) -> None:
        with self._lock:
            if self._resident.get(slot) is entry:
                del self._resident[slot]
        self._release(slot, entry)

    def _release(self, slot: tuple[str, str], entry: _Resident) -> None:
        key = entry.key()
        if key is not None:  # else the key is gone, and its bases with it (a weak dictionary's)
            self.ops.drop_bases(key, device_index(slot[0]))
        entry.reservation.release()

    def clear(self) -> None:
        with self._lock:
            gone = list(self._resident.items())
            self._resident.clear()
        for slot, entry in gone:
            self._release(slot, entry)

    # -- reading -----------------------------------------------------------------------------

    def resident(self, device: str) -> list[str]:
        """The circuits whose bases are resident on ``device``."""
        with self._lock:
            return sorted(circuit for dev, circuit in self._resident if dev == device)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per device: its budget and what is reserved, by owner (what the host row records)."""
        out: dict[str, dict[str, Any]] = {}
        for device, manager in sorted(self.managers.items()):
            snap = manager.snapshot()
            out[device] = {"budget": snap["budget"], "by_owner": snap["by_owner"]}
        return out
