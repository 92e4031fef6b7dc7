"""The work this host holds, and the one way its life moves: events posted, instructions carried out.

Every stage gets the same ``InFlight`` (the book). A thread that has news about an item posts
it (``run(item, event)``): the book steps the item's lifecycle (engine.pipeline.lifecycle, a
pure function, under the item's own lock) and carries out the instructions that come back,
each by the stage that owns it (``executors``, wired by the host), posting in turn the event
an instruction answers (a record written or refused, a reservation made, a launch done) until
none is left to carry out here. An item whose life ended leaves the book, counted.

``record`` is how a stage writes its item's transition: tried again while the database is
away, so a blip never throws a finished proof away; a write the records refuse (fenced,
cancelled) is the stage's ``Refused``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection

from engine.ledger.claims import Claim
from engine.ledger.job_log import about
from engine.ledger.writer import Refused as RecordRefused
from engine.ledger.writer import StatusWriter, Transition
from engine.models import Partition
from engine.pipeline import lifecycle as lc
from engine.pipeline.supervise import retry_while_down
from engine.pipeline.work import WorkItem
from engine.states import PartitionState

log = logging.getLogger("engine")
P = PartitionState

Executor = Callable[[WorkItem, Any], lc.Event | None]


@dataclass
class Stats:
    completed: int = 0
    failed: int = 0
    dropped: int = 0
    # Each phase's seconds summed over the completed partitions: constant memory however long
    # the engine runs (it kept every partition's timings once, a leak over a process's life).
    timing_sums: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ended(self, item: WorkItem) -> None:
        phase = item.state.phase
        if phase is lc.Phase.DONE:
            self.add_timings(timings(item))
            return
        with self._lock:  # items end on several threads at once
            if phase is lc.Phase.FAILED:
                self.failed += 1
            else:
                self.dropped += 1

    def add_timings(self, timings: dict[str, float]) -> None:
        """A completed partition's seconds by phase."""
        with self._lock:
            self.completed += 1
            for name, seconds in timings.items():
                self.timing_sums[name] = self.timing_sums.get(name, 0.0) + seconds

    def mean_ms(self, phase: str) -> float:
        """A phase's mean over the completed partitions, in ms (bench/engine.py reports them)."""
        return 1000 * self.timing_sums.get(phase, 0.0) / max(self.completed, 1)


def timings(item: WorkItem) -> dict[str, float]:
    """Seconds in each stage: synthesis (in its process), the launch (in the device's lock),
    the finish (waiting for the device, finishing and verifying on the CPU)."""
    out = {}
    if item.synthesized is not None:
        out["synth_s"] = item.synthesized.seconds
    if item.launch is not None:
        out["gpu_s"] = item.launch.seconds
    if item.proof is not None:
        out["finish_s"] = item.proof.seconds
    return out


@dataclass
class Signals:
    """What the threads of one host share: stop, wake the dispatcher, nothing left to claim."""

    stopping: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    queue_empty: threading.Event = field(default_factory=threading.Event)
    # An operator's drain, read from the host row at each heartbeat: claim nothing new.
    draining: threading.Event = field(default_factory=threading.Event)


def _key(instruction: lc.Instruction) -> tuple[type, Any]:
    if isinstance(instruction, lc.Record):
        return lc.Record, instruction.target
    return type(instruction), None


class InFlight:
    def __init__(self, writer: StatusWriter, retry_seconds: float = 60.0, halt: threading.Event | None = None) -> None:
        self.writer = writer
        self.stats = Stats()
        # How long a transition is tried again while the database is away before the item is
        # given up to its lease; ``halt`` (the engine gone for good) cuts it short.
        self.retry_seconds = retry_seconds
        self.halt = halt
        # Who carries out each instruction: (Record, target) for a record, (type, None) else;
        # a Release is split between its owners (LAUNCH: the proving stage; the rest: reserve).
        self.executors: dict[tuple[type, Any], Executor] = {
            (lc.Fail, None): self._fail,
            (lc.HandBack, None): self._hand_back,
        }
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

    # -- the lifecycle ------------------------------------------------------------------------

    def post(self, item: WorkItem, event: lc.Event) -> list[lc.Instruction]:
        """Step the item's lifecycle; the instructions, for the caller to carry out."""
        with item.lock:
            item.state, out = lc.step(item.state, event)
        return out

    def run(self, item: WorkItem, event: lc.Event) -> None:
        """Post ``event`` and carry out what follows."""
        self.carry(item, self.post(item, event))

    def carry(self, item: WorkItem, out: list[lc.Instruction]) -> None:
        """Carry out ``out``, then the instructions of each event an instruction answers."""
        while True:
            answer = None
            for instruction in out:
                answer = self.carry_out(item, instruction) or answer
            if item.state.ended:
                self._forget(item)
            if answer is None:
                return
            out = self.post(item, answer)

    def carry_out(self, item: WorkItem, instruction: lc.Instruction) -> lc.Event | None:
        if isinstance(instruction, lc.Release):
            launch = instruction.holds & {lc.Hold.LAUNCH}
            rest = instruction.holds - launch
            if launch:
                self.executors[(lc.Release, lc.Hold.LAUNCH)](item, lc.Release(launch))
            if rest:
                self.executors[(lc.Release, None)](item, lc.Release(rest))
            return None
        return self.executors[_key(instruction)](item, instruction)

    def _forget(self, item: WorkItem) -> None:
        with self._lock:
            if self._items.get(item.claim.partition_id) is not item:
                return
            del self._items[item.claim.partition_id]
        self.stats.ended(item)

    # -- writing an item's transitions ---------------------------------------------------------

    def record(self, item: WorkItem, target: str, written_at: tuple[str, ...] = (), **fields: Any) -> lc.Event:
        """Write one transition for ``item``, tried again while the database is away (a blip
        must not throw a finished proof away): ``Recorded``, or ``Refused`` when the records
        no longer allow it or the database stayed away past every retry (its lease lapses and
        another host, or this one later, proves it again). The moment columns ``written_at`` names
        are set to when the transition is written (engine.ledger.writer.Transition)."""
        try:
            self._apply(item, Transition(item.claim, target, fields, written_at=written_at))
        except RecordRefused:
            return lc.Refused()
        except DatabaseError as exc:
            log.error("recording %s for %s failed (%s); the lease will requeue it", target, item.label, exc,
                      extra=self.about(item))
            connection.close()
            return lc.Refused()
        return lc.Recorded()

    def record_batch(self, items: list[WorkItem], target: str, **fields: Any) -> list[lc.Event]:
        """One transition for each of ``items`` in ONE transaction (a batch going onto the GPU
        together, so the records never show part of it there): each member's answer."""
        try:
            ok = retry_while_down(
                lambda: self.writer.apply_batch([Transition(item.claim, target, fields) for item in items]),
                self.retry_seconds, f"recording {target} for a batch of {len(items)}", halt=self.halt)
        except DatabaseError as exc:
            log.error("recording %s for a batch of %d failed (%s); the leases will requeue them", target, len(items),
                      exc)
            connection.close()
            ok = [False] * len(items)
        return [lc.Recorded() if accepted else lc.Refused() for accepted in ok]

    def _apply(self, item: WorkItem, t: Transition) -> None:
        """``t`` written, again while the database is away. A retry refused because the try
        before it did commit (its answer lost with the connection) is the write done."""
        tries = 0

        def write() -> None:
            nonlocal tries
            tries += 1
            try:
                self.writer.apply(t)
            except RecordRefused:
                if tries == 1 or not self._written(t):
                    raise

        retry_while_down(write, self.retry_seconds, f"recording {t.target} for {item.label}", halt=self.halt)

    def _written(self, t: Transition) -> bool:
        target = P.PENDING if t.target == P.FAILED and t.retryable else t.target
        return Partition.objects.filter(pk=t.claim.partition_id, attempt=t.claim.attempt,
                                        state__in={target, t.target}).exists()

    def _fail(self, item: WorkItem, instruction: lc.Fail) -> None:
        log.warning("%s failed: %s", item.label, instruction.reason, extra=self.about(item))
        try:
            self._apply(item, Transition(item.claim, P.FAILED, reason=instruction.reason,
                                         retryable=instruction.retryable))
        except RecordRefused:
            pass
        except DatabaseError as exc:
            log.error("recording the failure of %s failed (%s); the lease will requeue it", item.label, exc,
                      extra=self.about(item))
            connection.close()

    def _hand_back(self, item: WorkItem, instruction: lc.HandBack) -> None:
        self.hand_back(item.claim, instruction.reason)

    def hand_back(self, claim: Claim, reason: str, seconds: float | None = None) -> None:
        """The claim back to the queue, for another host or a later claim (not a failure)."""
        try:
            retry_while_down(lambda: self.writer.hand_back(claim, reason),
                             self.retry_seconds if seconds is None else seconds,
                             f"handing back partition {claim.partition_id}", halt=self.halt)
        except DatabaseError as exc:
            log.error("could not hand back partition %d (%s): its lease will lapse", claim.partition_id, exc)
            connection.close()

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
        except RecordRefused:
            pass
