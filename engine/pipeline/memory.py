"""The host memory budget: every byte the engine holds is reserved here first.

* ``acquire`` blocks until the bytes fit; waiters are served strictly in order of
  (priority, arrival), so a large request is never starved by a stream of small ones.
* When the head waiter is short, evictors (idle proving keys, oldest first) are asked to
  free memory before anyone sleeps.
* A request larger than the whole budget fails at once (it could never be served).
* The sum of reservations never exceeds the budget; ``snapshot`` gives it by owner.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from engine.env import parse_size
from engine.format import fmt_bytes

Evictor = Callable[[int], int]  # asked to free at least n bytes; returns bytes freed


class MemoryBudgetError(ValueError):
    """A request that can never fit the budget."""


def total_ram() -> int:
    import os

    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def budget_bytes(budget: str, margin: str) -> int:
    """``auto`` = total RAM minus the safety margin; otherwise a size such as 64GiB."""
    if budget.strip().lower() == "auto":
        return max(total_ram() - parse_size(margin), 0)
    return parse_size(budget)


@dataclass(order=True)
class _Ticket:
    priority: int
    seq: int


class Reservation:
    """Bytes held by one owner; released on exit, or part by part."""

    def __init__(self, manager: MemoryManager, owner: str, nbytes: int) -> None:
        self.manager = manager
        self.owner = owner
        self.nbytes = nbytes

    def release_part(self, nbytes: int) -> None:
        nbytes = min(max(nbytes, 0), self.nbytes)
        self.nbytes -= nbytes
        self.manager._give_back(self.owner, nbytes)

    def release(self) -> None:
        self.release_part(self.nbytes)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Reservation({self.owner!r}, {self.nbytes})"


class MemorySnapshot(TypedDict):
    budget: int
    used: int
    available: int
    by_owner: dict[str, int]
    waiting: int
    peak: int


class MemoryManager:
    def __init__(self, budget: int) -> None:
        if budget <= 0:
            raise MemoryBudgetError(f"memory budget must be positive, got {budget}")
        self.budget = budget
        self.used = 0
        self.by_owner: dict[str, int] = {}
        self.evictors: list[Evictor] = []
        self._cond = threading.Condition()
        self._waiting: list[_Ticket] = []
        self._seq = itertools.count()
        self.peak = 0
        self._watchers: list[tuple[Callable[[str], bool], Callable[[], None]]] = []

    def watch(self, owners: Callable[[str], bool], changed: Callable[[], None]) -> None:
        """Call ``changed()`` after every reservation or release of an owner ``owners`` picks,
        outside this manager's lock (it may write a record)."""
        self._watchers.append((owners, changed))

    def _changed(self, owner: str) -> None:
        for owners, changed in self._watchers:
            if owners(owner):
                changed()

    # -- reserving -----------------------------------------------------------------------

    def acquire(self, owner: str, nbytes: int, priority: int = 2, timeout: float | None = None,
                cancelled: Callable[[], bool] | None = None) -> Reservation:
        """Block until ``nbytes`` fit; raise MemoryBudgetError at once if they never can.

        ``cancelled`` is polled while waiting; when it turns true the wait ends with
        InterruptedError (a cancelled job must not keep its place in the line).
        """
        self.check_possible(owner, nbytes)
        ticket = _Ticket(priority, next(self._seq))
        with self._cond:
            self._waiting.append(ticket)
            self._waiting.sort()
        try:
            reservation = self._wait_for_turn(ticket, owner, nbytes, timeout, cancelled)
        finally:
            with self._cond:
                self._waiting.remove(ticket)
                self._cond.notify_all()  # the next in line may now be the head
        if nbytes:
            self._changed(owner)
        return reservation

    def extend(self, reservation: Reservation, nbytes: int, priority: int = 2, timeout: float | None = None) -> None:
        """Grow ``reservation`` by ``nbytes``, blocking as acquire does (a key found larger,
        once loaded, than its estimate)."""
        self.check_possible(reservation.owner, reservation.nbytes + nbytes)
        more = self.acquire(reservation.owner, nbytes, priority, timeout=timeout)
        reservation.nbytes += more.nbytes
        more.nbytes = 0

    def _wait_for_turn(self, ticket: _Ticket, owner: str, nbytes: int, timeout: float | None,
                       cancelled: Callable[[], bool] | None) -> Reservation:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if cancelled is not None and cancelled():
                raise InterruptedError(f"{owner}: gave up waiting for {fmt_bytes(nbytes)}")
            with self._cond:
                if self._waiting[0] is ticket and self._fits(nbytes):
                    return self._take(owner, nbytes)
                head = self._waiting[0] is ticket
            # Evictors release through this manager, so they run without our lock held.
            if head and self._evict(nbytes - (self.budget - self.used)):
                continue
            with self._cond:
                if self._waiting[0] is ticket and self._fits(nbytes):
                    return self._take(owner, nbytes)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{owner}: {fmt_bytes(nbytes)} not available within {timeout}s")
                self._cond.wait(timeout=min(left, 0.25) if left is not None else 0.25)

    def check_possible(self, owner: str, nbytes: int) -> None:
        """Raise MemoryBudgetError when ``nbytes`` could never fit the budget."""
        if nbytes < 0:
            raise MemoryBudgetError(f"{owner}: negative request {nbytes}")
        if nbytes > self.budget:
            raise MemoryBudgetError(
                f"{owner} needs {fmt_bytes(nbytes)} but the whole memory budget is {fmt_bytes(self.budget)}; "
                f"raise PROVINGSITE_MEMORY_BUDGET (runengine --budget) or use a smaller scale")

    def _fits(self, nbytes: int) -> bool:
        return self.used + nbytes <= self.budget

    def _take(self, owner: str, nbytes: int) -> Reservation:
        self.used += nbytes
        self.peak = max(self.peak, self.used)
        if nbytes:  # an empty reservation names no owner (none would ever remove it)
            self.by_owner[owner] = self.by_owner.get(owner, 0) + nbytes
        return Reservation(self, owner, nbytes)

    def _give_back(self, owner: str, nbytes: int) -> None:
        if nbytes == 0:
            return
        with self._cond:
            self.used -= nbytes
            left = self.by_owner.get(owner, 0) - nbytes
            if left > 0:
                self.by_owner[owner] = left
            else:
                self.by_owner.pop(owner, None)
            self._cond.notify_all()
        self._changed(owner)

    def _evict(self, short: int) -> bool:
        freed = 0
        for evictor in list(self.evictors):
            if freed >= short:
                break
            freed += evictor(short - freed)
        return freed > 0

    # -- reading -------------------------------------------------------------------------

    def held_by(self, owners: Callable[[str], bool]) -> int:
        """The bytes reserved by the owners ``owners`` picks."""
        with self._cond:
            return sum(n for owner, n in self.by_owner.items() if owners(owner))

    def add_evictor(self, evictor: Evictor) -> None:
        self.evictors.append(evictor)

    def snapshot(self) -> MemorySnapshot:
        with self._cond:
            return {"budget": self.budget, "used": self.used, "available": self.budget - self.used,
                    "by_owner": dict(self.by_owner), "waiting": len(self._waiting), "peak": self.peak}


def gpu_memory(device: str) -> dict[str, int | None]:
    """Free/total bytes and CuPy's pool use for a CUDA device; n/a (None) for the CPU."""
    if not device.startswith("cuda:"):
        return {"total": None, "free": None, "pool_used": None}
    try:
        import cupy

        with cupy.cuda.Device(int(device.split(":")[1])):
            free, total = cupy.cuda.runtime.memGetInfo()
            pool = cupy.get_default_memory_pool().used_bytes()
        return {"total": int(total), "free": int(free), "pool_used": int(pool)}
    except Exception:  # no driver, no device: report n/a rather than fail the heartbeat
        return {"total": None, "free": None, "pool_used": None}


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")  # runs ldconfig: once per process
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)  # not glibc: nothing to hand back this way


def release_freed_memory() -> None:
    """Hand the heap's freed memory back to the system (glibc keeps it for reuse, and what a
    process keeps counts against the budget as much as what it uses): after a porep-c2/large key
    load the process held 938 MiB more than before for a key of 827 MiB, 832 MiB once trimmed.
    The engine calls it after a key load and a finished partition, a synthesis process before
    each task."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
