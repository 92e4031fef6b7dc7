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
from engine.models import Partition
from engine.pipeline.keycache import KeyCache
from engine.pipeline.supervise import retry_while_down
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
    def __init__(self, writer: StatusWriter, keycache: KeyCache, retry_seconds: float = 60.0,
                 halt: threading.Event | None = None) -> None:
        self.writer = writer
        self.keycache = keycache
        # How long a transition is tried again while the database is away before the item is
        # given up to its lease; ``halt`` (the engine gone for good) cuts it short.
        self.retry_seconds = retry_seconds
        self.halt = halt
        self.stats = Stats()
        self._items: dict[int, WorkItem] = {}
        self._held: dict[int, Claim] = {}  # claimed, not yet a work item (its job being read)
        self._lock = threading.Lock()

    # -- what the host holds ----------------------------------------------------------------

    def hold(self, claim: Claim) -> None:
        """A claim just taken: its lease is renewed (and it is handed back on stop) from now."""
        with self._lock:
            self._held[claim.partition_id] = claim

    def add(self, item: WorkItem) -> WorkItem:
        with self._lock:
            self._held.pop(item.claim.partition_id, None)
            self._items[item.claim.partition_id] = item
        return item

    def items(self) -> dict[int, WorkItem]:
        with self._lock:
            return dict(self._items)

    def claims(self) -> list[Claim]:
        """Every claim this host holds, loaded or not."""
        with self._lock:
            return [item.claim for item in self._items.values()] + list(self._held.values())

    def held_claims(self) -> list[Claim]:
        """Claims not loaded into work items."""
        with self._lock:
            return list(self._held.values())

    def __len__(self) -> int:
        return len(self._items) + len(self._held)

    def __bool__(self) -> bool:
        return bool(self._items or self._held)

    def about(self, item: WorkItem) -> dict[str, Any]:
        """A log line's fields for ``item`` (``extra=``): its job's page keeps the line."""
        return about(item.job_id, item.index, self.writer.host.name)

    # -- what a stage reports -----------------------------------------------------------------

    def record(self, item: WorkItem, target: str, **fields: Any) -> bool:
        """Write one transition for ``item``, tried again while the database is away (a blip
        must not throw a finished proof away). When it cannot be written the item is dropped
        here, its memory freed, and False returned: the caller only stops."""
        try:
            self._apply(item, Transition(item.claim, target, fields))
        except Refused:
            self.drop(item)
            return False
        except DatabaseError as exc:
            # Still unreachable after the retries: drop the work here; its lease lapses and
            # another host (or this one, later) proves it again.
            log.error("recording %s for %s failed (%s); the lease will requeue it", target, item.label, exc,
                      extra=self.about(item))
            connection.close()
            self.drop(item)
            return False
        return True

    def _apply(self, item: WorkItem, t: Transition) -> None:
        """``t`` written, again while the database is away. A retry refused because the try
        before it did commit (its answer lost with the connection) is the write done."""
        tries = 0

        def write() -> None:
            nonlocal tries
            tries += 1
            try:
                self.writer.apply(t)
            except Refused:
                if tries == 1 or not self._written(t):
                    raise

        retry_while_down(write, self.retry_seconds, f"recording {t.target} for {item.label}", halt=self.halt)

    def _written(self, t: Transition) -> bool:
        target = P.PENDING if t.target == P.FAILED and t.retryable else t.target
        return Partition.objects.filter(pk=t.claim.partition_id, attempt=t.claim.attempt,
                                        state__in={target, t.target}).exists()

    def record_batch(self, items: list[WorkItem], target: str, **fields: Any) -> list[WorkItem]:
        """One transition for each of ``items`` in ONE transaction (a batch going onto the GPU
        together, so the records never show part of it there); the members whose write the
        records refuse are dropped here. Returns the members written."""
        try:
            ok = retry_while_down(
                lambda: self.writer.apply_batch([Transition(item.claim, target, fields) for item in items]),
                self.retry_seconds, f"recording {target} for a batch of {len(items)}", halt=self.halt)
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
            self._apply(item, Transition(item.claim, P.FAILED, reason=reason, retryable=retryable))
            self.stats.failed += 1
        except Refused:
            pass
        except DatabaseError as exc:
            log.error("recording the failure of %s failed (%s); the lease will requeue it", item.label, exc,
                      extra=self.about(item))
            connection.close()
        self.release(item)

    def fail_claim(self, claim: Claim, reason: str) -> None:
        """A claim that never became a work item fails (not retried: its job cannot be read)."""
        with self._lock:
            self._held.pop(claim.partition_id, None)
        log.warning("partition %d failed: %s", claim.partition_id, reason)
        try:
            retry_while_down(lambda: self.writer.apply(Transition(claim, P.FAILED, reason=reason)),
                             self.retry_seconds, f"recording the failure of partition {claim.partition_id}",
                             halt=self.halt)
            self.stats.failed += 1
        except Refused:
            pass

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
