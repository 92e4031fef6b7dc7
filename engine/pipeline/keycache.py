"""Proving keys held in memory, each one accounted in the memory budget.

A key is checked out for every partition that will need it (refcount) and checked back in
when the partition is finished. Its bytes are reserved from an estimate before it loads, then
trued up to what the loaded key holds (its points, matrices and fixed-base tables). Keys
nobody holds stay loaded for the next partition but are evictable: when the budget is short
the memory manager asks this cache to drop idle keys, least recently used first (Filecoin's
parameter cache behaves the same).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.format import fmt_bytes
from engine.pipeline.keymap import MappedKey
from engine.pipeline.memory import MemoryBudgetError, MemoryManager, Reservation
from engine.status.holdings import held_for_good, key_owner, loading_owner
from engine.status.host_report import KeyReport

log = logging.getLogger("engine.keycache")

Loader = Callable[[str], Any]  # circuit id → proving key
Mapper = Callable[[Any, str], MappedKey]  # a hot key, its circuit id → the key memory-mapped (warm)


class KeyTier(enum.StrEnum):
    """Where a host holds a key: in memory (its arrays and fixed-base tables), memory-mapped
    from its on-disk image, or on disk only (not in the cache's list)."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


RANK = {KeyTier.HOT: 0, KeyTier.WARM: 1, KeyTier.COLD: 2}  # best first, as placement ranks them


class KeyControlRefused(Exception):
    """An operator's preload or evict this host will not carry out now; the message says why."""


@dataclass
class _Entry:
    circuit_id: str
    key: Any
    reservation: Reservation
    users: int = 0
    last_used: float = 0.0
    loaded_at: datetime | None = None
    tier: KeyTier = KeyTier.HOT
    last_used_at: datetime | None = None
    load_seconds: float | None = None  # the last load from disk (cold → hot)
    mapped_bytes: int = 0  # warm: the image's mapped size (page cache, not charged)

    def touch(self) -> None:
        self.last_used = time.monotonic()
        self.last_used_at = datetime.now(UTC)


class KeyCache:
    """``on_change`` runs after a key is loaded, demoted or evicted, outside the cache's locks:
    the engine writes the new list to its host row then, so that by the time a partition proves
    with a key, every reader already sees that key loaded (a heartbeat would be up to a beat late).

    Under memory pressure idle keys are demoted a tier at a time, least recently used first
    within a tier: every idle hot key becomes warm (``mapper``) before any warm key is dropped
    to cold. Without a mapper a hot key goes straight to cold."""

    def __init__(self, memory: MemoryManager, loader: Loader, on_change: Callable[[], None] | None = None,
                 sizer: Callable[[Any], int] | None = None, mapper: Mapper | None = None,
                 transient: Callable[[str], int] | None = None,
                 on_drop: Callable[[str], None] | None = None) -> None:
        self.memory = memory
        # Told a circuit id once the cache no longer holds that key object (demoted or dropped):
        # what was kept beside it elsewhere (its bases on a device) goes with it. Called outside
        # the cache's locks.
        self.on_drop = on_drop
        self._dropped: list[str] = []
        self.transient = transient  # circuit id → what its load holds beside the key, while it loads
        self.loader = loader
        self.on_change = on_change
        self.sizer = sizer  # a loaded key's real bytes: its reservation is trued up to them
        self.mapper = mapper
        self._entries: dict[str, _Entry] = {}
        self._refused: dict[str, str] = {}  # circuit id → why this host will not prove it
        self._lock = threading.RLock()
        self.evictions = 0
        self.demotions: list[tuple[str, KeyTier, KeyTier]] = []  # (circuit, from, to), oldest first
        self._loading = threading.Lock()  # one load at a time: two misses never load twice
        memory.add_evictor(self.evict)

    def checkout(self, circuit_id: str, nbytes: int, priority: int = 2) -> Any:
        """The key, loaded if needed (its bytes reserved first); pinned until check_in. A warm
        key is proved from its map as it is (not promoted: see keymap)."""
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
                    entry.touch()
                    return entry.key, False
            self._load(circuit_id, nbytes, priority, users=1)
            return self._entries[circuit_id].key, True

    def _load(self, circuit_id: str, nbytes: int, priority: int, users: int) -> None:
        """Cold → hot: reserve the estimate, read the key, true the reservation up to it."""
        extra = self.transient(circuit_id) if self.transient is not None else 0
        engine = self.memory.held_by(held_for_good)  # never given back while this load waits
        if nbytes + extra + engine > self.memory.budget:
            beside = f" beside the engine's own {fmt_bytes(engine)} (processes at rest, compiled matrices)" if engine else ""
            raise MemoryBudgetError(
                f"loading {circuit_id} needs {fmt_bytes(nbytes)} for the key and {fmt_bytes(extra)} while it reads"
                f"{beside}, more than the whole memory budget of {fmt_bytes(self.memory.budget)}")
        reservation = self.memory.acquire(key_owner(circuit_id), nbytes, priority)
        started = time.monotonic()
        try:
            # The reader's own buffers, beside the arrays it builds, for as long as it reads.
            with self.memory.acquire(loading_owner(circuit_id), extra, priority):
                key = self.loader(circuit_id)
            if self.sizer is not None:
                self._true_up(reservation, self.sizer(key), priority)
        except BaseException:
            reservation.release()
            raise
        took = time.monotonic() - started
        log.info("loaded proving key %s hot: %s in %.2f s", circuit_id, fmt_bytes(reservation.nbytes), took)
        with self._lock:
            entry = _Entry(circuit_id, key, reservation, users, loaded_at=datetime.now(UTC), load_seconds=took)
            entry.touch()
            self._entries[circuit_id] = entry

    def _true_up(self, reservation: Reservation, actual: int, priority: int) -> None:
        """The estimate reserved before loading becomes what the key really holds: less gives
        the rest back, more is reserved too (a key whose file says more than its estimate)."""
        if actual < reservation.nbytes:
            reservation.release_part(reservation.nbytes - actual)
        elif actual > reservation.nbytes:
            self.memory.extend(reservation, actual - reservation.nbytes, priority)

    def reserved_bytes(self, circuit_id: str) -> int:
        """The bytes a loaded key holds in the budget (0 when it is not loaded)."""
        with self._lock:
            entry = self._entries.get(circuit_id)
            return entry.reservation.nbytes if entry is not None else 0

    def tier(self, circuit_id: str) -> KeyTier:
        with self._lock:
            entry = self._entries.get(circuit_id)
            return entry.tier if entry is not None else KeyTier.COLD

    def check_in(self, circuit_id: str) -> None:
        with self._lock:
            entry = self._entries.get(circuit_id)
            if entry is not None and entry.users > 0:
                entry.users -= 1
                entry.touch()

    def evict(self, needed: int) -> int:
        """Demote idle keys until ``needed`` bytes are freed: hot ones to warm first, then warm
        ones to cold, least recently used first within each tier; returns bytes freed."""
        freed, demoted = 0, False
        with self._lock:
            for tier in (KeyTier.HOT, KeyTier.WARM):
                for entry in sorted(self._entries.values(), key=lambda e: e.last_used):
                    if freed >= needed:
                        break
                    if entry.users == 0 and entry.tier is tier:
                        freed += self._demote(entry, self._below(tier))
                        demoted = True
        self._tell_dropped()
        if demoted:
            self._changed()
        return freed

    def _below(self, tier: KeyTier) -> KeyTier:
        return KeyTier.WARM if tier is KeyTier.HOT and self.mapper is not None else KeyTier.COLD

    def _demote(self, entry: _Entry, to: KeyTier) -> int:
        """One idle key a tier (or two) down, under our lock; returns the bytes its reservation
        gave back. (Releasing under our lock is safe: the manager never calls an evictor while
        it holds its own lock.)"""
        was, held = entry.tier, entry.reservation.nbytes
        mapped = self._mapped(entry) if to is KeyTier.WARM else None
        if mapped is not None:
            entry.key, entry.tier, entry.mapped_bytes = mapped.key, KeyTier.WARM, mapped.mapped_bytes
            give = max(held - mapped.resident_bytes, 0)
        else:
            to = KeyTier.COLD
            del self._entries[entry.circuit_id]
            give = held
        entry.reservation.release_part(give)
        self._dropped.append(entry.circuit_id)  # warm or cold, the hot key object is let go
        self.evictions += 1
        self.demotions.append((entry.circuit_id, was, to))
        log.info("demoted idle proving key %s %s → %s: %s freed", entry.circuit_id, was, to, fmt_bytes(give))
        return give

    def _mapped(self, entry: _Entry) -> MappedKey | None:
        """The key's warm form; None (the key goes cold instead) when its image cannot be
        written or mapped: a full disk must not fail the reservation that asked for room."""
        assert self.mapper is not None
        try:
            return self.mapper(entry.key, entry.circuit_id)
        except Exception:
            log.exception("could not map proving key %s: dropping it to cold instead", entry.circuit_id)
            return None

    # -- operator control ----------------------------------------------------------------

    def preload(self, circuit_id: str, tier: KeyTier, nbytes: int) -> None:
        """Make ``circuit_id`` resident at ``tier`` (hot or warm) or above, ``nbytes`` its
        estimate. A preload never evicts another key: one that would not fit the free budget is
        refused. A warm key preloaded hot is read again from disk (its tables are rebuilt)."""
        if tier is KeyTier.COLD:
            raise KeyControlRefused("a preload is to hot or warm")
        with self._loading:
            with self._lock:
                entry = self._entries.get(circuit_id)
                if entry is not None and (entry.tier is tier or entry.tier is KeyTier.HOT):
                    return  # there already, or above: a preload never demotes (that is an evict)
                if entry is not None and entry.users:
                    raise KeyControlRefused(f"{circuit_id} is in use warm by {entry.users} partition(s)")
            free = self.memory.budget - self.memory.used + self.reserved_bytes(circuit_id)
            if nbytes > free:
                raise KeyControlRefused(f"{circuit_id} needs {fmt_bytes(nbytes)} ({nbytes} bytes) but "
                                        f"{fmt_bytes(free)} ({free} bytes) of the budget is free")
            self._drop(circuit_id)
            self._load(circuit_id, nbytes, 0, users=0)
            if tier is KeyTier.WARM:
                with self._lock:
                    self._demote_now(self._entries[circuit_id], KeyTier.WARM)
        self._tell_dropped()
        self._changed()

    def demote(self, circuit_id: str, tier: KeyTier) -> None:
        """An operator's evict: ``circuit_id`` down to ``tier`` (warm or cold) if it is idle."""
        if tier is KeyTier.HOT:
            raise KeyControlRefused("an evict is to warm or cold")
        with self._lock:
            entry = self._entries.get(circuit_id)
            if entry is None or RANK[entry.tier] >= RANK[tier]:
                return  # already there or below: nothing to do
            if entry.users:
                raise KeyControlRefused(f"{circuit_id} is in use by {entry.users} partition(s)")
            if tier is KeyTier.WARM and self.mapper is None:
                raise KeyControlRefused("this cache has no warm tier")
            self._demote_now(entry, tier)
        self._tell_dropped()
        self._changed()

    def _demote_now(self, entry: _Entry, to: KeyTier) -> None:
        self._demote(entry, to)

    def _drop(self, circuit_id: str) -> None:
        with self._lock:
            entry = self._entries.pop(circuit_id, None)
        if entry is not None:
            entry.reservation.release()
            self._tell_dropped([circuit_id])

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.reservation.release()
        self._tell_dropped([entry.circuit_id for entry in entries])

    def _tell_dropped(self, circuit_ids: list[str] | None = None) -> None:
        """Run the on_drop hook for the keys let go (those ``_demote`` noted, under the lock)."""
        with self._lock:
            gone, self._dropped = self._dropped + (circuit_ids or []), []
        if self.on_drop is None:
            return
        for circuit_id in gone:
            try:
                self.on_drop(circuit_id)
            except Exception:  # the key is gone from the cache either way
                log.exception("could not let go of what was kept beside proving key %s", circuit_id)

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
            return [KeyReport(e.circuit_id, e.reservation.nbytes, e.loaded_at, tier=str(e.tier),
                              last_used_at=e.last_used_at, load_seconds=e.load_seconds,
                              mapped_bytes=e.mapped_bytes).to_json()
                    for e in sorted(self._entries.values(), key=lambda e: e.circuit_id)]
