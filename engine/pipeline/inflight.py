"""The work this host holds, and the one way a stage reports on it to the ledger.

Every stage gets the same ``InFlight``: it records a transition of an item (``record``),
fails it (``fail``), drops it when the records no longer want it (``drop``), or completes it
(``completed``); each of those frees what the item holds (memory, its proving key) exactly
once. The stages never see the host that wires them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection

from engine.ledger.claims import Claim
from engine.ledger.job_log import about
from engine.ledger.writer import Refused, StatusWriter, Transition
from engine.pipeline.keycache import KeyCache
from engine.pipeline.work import WorkItem
from engine.states import PartitionState

log = logging.getLogger("engine")
P = PartitionState


@dataclass
class Stats:
    completed: int = 0
    failed: int = 0
    dropped: int = 0
    # Each phase's seconds summed over the completed partitions: constant memory however long
    # the engine runs (it kept every partition's timings once, a leak over a process's life).
    timing_sums: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_timings(self, timings: dict[str, float]) -> None:
        with self._lock:  # finalizer threads complete partitions concurrently
            self.completed += 1
            for phase, seconds in timings.items():
                self.timing_sums[phase] = self.timing_sums.get(phase, 0.0) + seconds

    def mean_ms(self, phase: str) -> float:
        """A phase's mean over the completed partitions, in ms (bench/engine.py reports them)."""
        return 1000 * self.timing_sums.get(phase, 0.0) / max(self.completed, 1)


@dataclass
class Signals:
    """What the threads of one host share: stop, wake the dispatcher, nothing left to claim."""

    stopping: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    queue_empty: threading.Event = field(default_factory=threading.Event)
    # An operator's drain, read from the host row at each heartbeat: claim nothing new.
    draining: threading.Event = field(default_factory=threading.Event)


class InFlight:
    def __init__(self, writer: StatusWriter, keycache: KeyCache) -> None:
        self.writer = writer
        self.keycache = keycache
        self.stats = Stats()
        self._items: dict[int, WorkItem] = {}
        self._lock = threading.Lock()

    # -- what the host holds ----------------------------------------------------------------

    def add(self, item: WorkItem) -> WorkItem:
        with self._lock:
            self._items[item.claim.partition_id] = item
        return item

    def items(self) -> dict[int, WorkItem]:
        with self._lock:
            return dict(self._items)

    def claims(self) -> list[Claim]:
        return [item.claim for item in self.items().values()]

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def about(self, item: WorkItem) -> dict[str, Any]:
        """A log line's fields for ``item`` (``extra=``): its job's page keeps the line."""
        return about(item.job_id, item.index, self.writer.host.name)

    # -- what a stage reports -----------------------------------------------------------------

    def record(self, item: WorkItem, target: str, **fields: Any) -> bool:
        """Write one transition for ``item``. When it cannot be written the item is dropped
        here, its memory freed, and False returned: the caller only stops."""
        try:
            self.writer.apply(Transition(item.claim, target, fields))
        except Refused:
            self.drop(item)
            return False
        except DatabaseError as exc:
            # The database is unreachable or killed our session: drop the work here; its
            # lease lapses and another host (or this one, later) proves it again.
            log.error("recording %s for %s failed (%s); the lease will requeue it", target, item.label, exc,
                      extra=self.about(item))
            connection.close()
            self.drop(item)
            return False
        return True

    def record_batch(self, items: list[WorkItem], target: str, **fields: Any) -> list[WorkItem]:
        """One transition for each of ``items`` in ONE transaction (a batch going onto the GPU
        together, so the records never show part of it there); the members whose write the
        records refuse are dropped here. Returns the members written."""
        try:
            ok = self.writer.apply_batch([Transition(item.claim, target, fields) for item in items])
        except DatabaseError as exc:
            log.error("recording %s for a batch of %d failed (%s); the leases will requeue them", target, len(items),
                      exc)
            connection.close()
            ok = [False] * len(items)
        written = []
        for item, accepted in zip(items, ok, strict=True):
            if accepted:
                written.append(item)
            else:
                self.drop(item)
        return written

    def fail(self, item: WorkItem, reason: str, retryable: bool) -> None:
        log.warning("%s failed: %s", item.label, reason, extra=self.about(item))
        try:
            self.writer.apply(Transition(item.claim, P.FAILED, reason=reason, retryable=retryable))
            self.stats.failed += 1
        except Refused:
            pass
        except DatabaseError as exc:
            log.error("recording the failure of %s failed (%s); the lease will requeue it", item.label, exc,
                      extra=self.about(item))
            connection.close()
        self.release(item)

    def drop(self, item: WorkItem, hand_back: bool = False, reason: str = "handed back: engine stopping") -> None:
        """Abandon work the records no longer want (cancelled, fenced), freeing its memory;
        ``hand_back``: to the queue, for another host or a later claim, saying ``reason``."""
        item.dropped = True
        if hand_back:
            self.writer.hand_back(item.claim, reason)
        self.stats.dropped += 1
        self.release(item)

    def completed(self, item: WorkItem) -> None:
        self.stats.add_timings(item.timings)
        self.release(item)

    def release(self, item: WorkItem) -> None:
        """Free everything ``item`` holds; safe to call twice."""
        with self._lock:
            if self._items.pop(item.claim.partition_id, None) is None:
                return
        if item.reservation is not None:
            item.reservation.release()
        if item.key is not None and item.source.shares_key:
            self.keycache.check_in(item.circuit_id)
        item.key = item.assignment = item.pending = None
