"""Proving keys held in memory, each one accounted in the memory budget.

A key is checked out for every partition that will need it (refcount) and checked back in
when the partition is finished. Its bytes are reserved from an estimate before it loads, then
trued up to what the loaded key holds (its points, matrices and fixed-base tables). Keys
nobody holds stay loaded for the next partition but are evictable: when the budget is short
the memory manager asks this cache to drop idle keys, least recently used first (Filecoin's
parameter cache behaves the same).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.pipeline.memory import MemoryManager, Reservation
from engine.status.holdings import key_owner
from engine.status.host_report import KeyReport

log = logging.getLogger("engine.keycache")

Loader = Callable[[str], Any]  # circuit id → proving key


@dataclass
class _Entry:
    circuit_id: str
    key: Any
    reservation: Reservation
    users: int = 0
    last_used: float = 0.0
    loaded_at: datetime | None = None


class KeyCache:
    """``on_change`` runs after a key is loaded or evicted, outside the cache's locks: the engine
    writes the new list to its host row then, so that by the time a partition proves with a key,
    every reader already sees that key loaded (a heartbeat would be up to a beat late)."""

    def __init__(self, memory: MemoryManager, loader: Loader, on_change: Callable[[], None] | None = None,
                 sizer: Callable[[Any], int] | None = None) -> None:
        self.memory = memory
        self.loader = loader
        self.on_change = on_change
        self.sizer = sizer  # a loaded key's real bytes: its reservation is trued up to them
        self._entries: dict[str, _Entry] = {}
        self._refused: dict[str, str] = {}  # circuit id → why this host will not prove it
        self._lock = threading.Lock()
        self.evictions = 0
        self._loading = threading.Lock()  # one load at a time: two misses never load twice
        memory.add_evictor(self.evict)

    def checkout(self, circuit_id: str, nbytes: int, priority: int = 2) -> Any:
        """The key, loaded if needed (its bytes reserved first); pinned until check_in."""
        key, loaded = self._checkout(circuit_id, nbytes, priority)
        if loaded:
            self._changed()
        return key

    def _changed(self) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change()
        except Exception:  # the next heartbeat writes the list anyway
            log.exception("could not report the key cache")

    def _checkout(self, circuit_id: str, nbytes: int, priority: int) -> tuple[Any, bool]:
        with self._loading:
            with self._lock:
                entry = self._entries.get(circuit_id)
                if entry is not None:
                    entry.users += 1
                    entry.last_used = time.monotonic()
                    return entry.key, False
            reservation = self.memory.acquire(key_owner(circuit_id), nbytes, priority)
            try:
                key = self.loader(circuit_id)
                if self.sizer is not None:
                    self._true_up(reservation, self.sizer(key), priority)
            except BaseException:
                reservation.release()
                raise
            with self._lock:
                self._entries[circuit_id] = _Entry(circuit_id, key, reservation, 1, time.monotonic(),
                                                   datetime.now(UTC))
            return key, True

    def _true_up(self, reservation: Reservation, actual: int, priority: int) -> None:
        """The estimate reserved before loading becomes what the key really holds: less gives
        the rest back, more is reserved too (built-in keys' matrices are not in the estimate)."""
        if actual < reservation.nbytes:
            reservation.release_part(reservation.nbytes - actual)
        elif actual > reservation.nbytes:
            self.memory.extend(reservation, actual - reservation.nbytes, priority)

    def reserved_bytes(self, circuit_id: str) -> int:
        """The bytes a loaded key holds in the budget (0 when it is not loaded)."""
        with self._lock:
            entry = self._entries.get(circuit_id)
            return entry.reservation.nbytes if entry is not None else 0

    def check_in(self, circuit_id: str) -> None:
        with self._lock:
            entry = self._entries.get(circuit_id)
            if entry is not None and entry.users > 0:
                entry.users -= 1
                entry.last_used = time.monotonic()

    def evict(self, needed: int) -> int:
        """Drop idle keys, oldest first, until ``needed`` bytes are freed; returns bytes freed."""
        freed = 0
        dropped: list[_Entry] = []
        with self._lock:
            for entry in sorted(self._entries.values(), key=lambda e: e.last_used):
                if freed >= needed:
                    break
                if entry.users == 0:
                    del self._entries[entry.circuit_id]
                    self.evictions += 1
                    freed += entry.reservation.nbytes
                    dropped.append(entry)
        for entry in dropped:  # release outside our lock: the manager notifies its waiters
            log.info("evicted idle proving key %s (%d bytes)", entry.circuit_id, entry.reservation.nbytes)
            entry.reservation.release()
        if dropped:
            self._changed()
        return freed

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.reservation.release()

    def refuse(self, circuit_id: str, reason: str) -> None:
        """This host will not prove ``circuit_id`` (its key is missing or not the farm's) until it
        restarts: its claims skip the circuit, and its host row says why."""
        with self._lock:
            self._refused[circuit_id] = reason
        self._changed()

    def refused(self) -> dict[str, str]:
        with self._lock:
            return dict(self._refused)

    def snapshot(self) -> list[dict[str, Any]]:
        """The resident keys, as written to the host row when one is loaded or evicted."""
        with self._lock:
            return [KeyReport(e.circuit_id, e.reservation.nbytes, e.loaded_at).to_json()
                    for e in sorted(self._entries.values(), key=lambda e: e.circuit_id)]
