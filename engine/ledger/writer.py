"""THE status writer: every change of a partition's or a job's state passes through here.

One writer per host applies `Transition` requests under one lock, checks each against the
state machine (engine.states), fences it against the claim it was made under, stamps it
with the next value of the host's own status clock (engine.ledger.clock, taken in the same
transaction, so no other host's writes wait for it), commits,
and only then publishes a "status.changed" hint on the channel layer. The console and /status
read the records; hints only say where to look, so a dropped hint costs a refresh, not truth.

Fencing: a claim bumps a partition's ``attempt``. A write carries the attempt (and host) it was
made under; if the row has moved on (requeued, claimed elsewhere, cancelled) the write is
refused and logged, so a stale worker can never overwrite newer truth.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engine.ledger import placement
from engine.ledger.claims import Claim, claim_partitions, close_gpu_interval, release_claim
from engine.ledger.clock import Stamp, host_clock, next_stamp
from engine.ledger.deadlocks import retried
from engine.ledger.hints import publish_hint
from engine.ledger.job_log import about
from engine.ledger.key_requests import fail_pending_of_stopped
from engine.ledger.leases import any_lapsed, requeue_lapsed_rows
from engine.ledger.locked import lock_job_of, locked_partition, write_columns
from engine.ledger.new_work import announce_new_work
from engine.ledger.settle import error_entry, failures_since_retry, settle_job
from engine.models import EngineHost, Partition, ProofJob
from engine.states import PARTITION_TERMINAL, PartitionState, TransitionError, check_partition_transition

log = logging.getLogger("engine.ledger")
# A line per claim and per proof: on the job's page always, in the engine's own log at debug.
progress = logging.getLogger("engine.progress")
P = PartitionState


@dataclass
class Transition:
    """Move one claimed partition to ``target``; ``fields`` are set on the row too."""

    claim: Claim
    target: str
    fields: dict[str, Any] = field(default_factory=dict)
    # For target FAILED: the reason, and whether another attempt may fix it.
    reason: str = ""
    retryable: bool = False
    # Moment columns set to when the transition is written, under the writer's lock: a moment
    # taken before waiting for the lock counted another transition's write as this one's.
    written_at: tuple[str, ...] = ()


class Refused(Exception):
    """A write the records no longer allow (stale claim or a state the machine forbids)."""


# Every column of a partition's row but its key, by attribute name (a foreign key's "_id").
_PARTITION_COLUMNS = tuple(f.attname for f in Partition._meta.concrete_fields if not f.primary_key)


class StatusWriter:
    """The one writer of a host. Thread-safe: callers from any engine thread share its lock."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host
        self.lock = threading.Lock()
        self.max_attempts = int(settings.PROVINGSITE["MAX_ATTEMPTS"])
        self.refused = 0
        self.busy_s = 0.0  # seconds spent writing records (the engine's own overhead)
        self.listeners: list[Callable[[Stamp], None]] = []  # called with each committed stamp
        self.clock = host_clock(host.name)
        self._free_marked = float("-inf")  # when mark_free last wrote (monotonic)
        self._job_names: dict[int, str] = {}  # job pk → job id (engine.ledger.writer._job_name)

    # -- the one path every write takes --------------------------------------------------

    def _commit(self, work: Callable[[Stamp], Iterable[dict[str, Any]]]) -> int:
        """Run ``work(stamp)`` in one transaction under the lock; publish its hints after.
        Returns the stamp's version (this host's clock)."""
        with self.lock:
            started = time.perf_counter()
            try:
                stamp, hints = self._run(work)
            finally:
                self.busy_s += time.perf_counter() - started
            for listener in self.listeners:
                listener(stamp)
        for hint in hints:
            publish_hint(host=self.host.name, version=stamp.version, **hint)
        return stamp.version

    def _run(self, work: Callable[[Stamp], Iterable[dict[str, Any]]]) -> tuple[Stamp, list[dict[str, Any]]]:
        """One transaction, run again if PostgreSQL rolls it back to break a deadlock."""

        def once() -> tuple[Stamp, list[dict[str, Any]]]:
            with transaction.atomic():
                stamp = next_stamp(self.clock)
                return stamp, list(work(stamp))

        return retried(once)

    def apply(self, t: Transition) -> int:
        """Apply one transition; returns its version, raises Refused when fenced or illegal."""

        def work(stamp: Stamp) -> list[dict[str, Any]]:
            if t.target in PARTITION_TERMINAL:
                # An ending partition may settle its job, which locks the job and then all its
                # partitions: take the job's lock first, in the order cancel and retry take
                # them, so two hosts ending partitions of one job queue instead of deadlocking.
                lock_job_of(t.claim.partition_id)
            # The partition's row alone, and its lock alone (taking the job's too would take it
            # after the partition, against the order above, and every transition would queue on
            # it). The job's row (its inputs decoded) is read only where it is used (a refusal's
            # log line); its name comes from the writer's own memory (_job_name).
            row = locked_partition(t.claim.partition_id)
            self._fence(row, t)
            hints = [self._write_partition(row, t, stamp)]
            if row.state in PARTITION_TERMINAL:  # only an ending partition can end its job
                # settle_job reads the job again under its lock, by its key
                hints += settle_job(ProofJob(pk=row.job_id), stamp, self.max_attempts, host=self.host.name)
            return hints

        try:
            return self._commit(work)
        except Refused:
            self.refused += 1
            raise

    def apply_batch(self, ts: list[Transition]) -> list[bool]:
        """Apply several non-terminal transitions in one transaction (a proving batch onto the
        GPU: all its members with one ``batch`` marker); a fenced or illegal member is left
        out (False) and the others written. Rows are locked in id order, as claims lock them."""
        if any(t.target in PARTITION_TERMINAL for t in ts):
            raise ValueError("apply_batch is for non-terminal transitions only")
        ok = [False] * len(ts)

        def work(stamp: Stamp) -> list[dict[str, Any]]:
            ok[:] = [False] * len(ts)  # a deadlock's retry starts again
            ids = sorted({t.claim.partition_id for t in ts})
            rows = {r.pk: r for r in Partition.objects.select_for_update(of=("self",)).select_related("job")
                    .filter(pk__in=ids).order_by("pk")}
            hints = []
            for i, t in enumerate(ts):
                row = rows.get(t.claim.partition_id)
                if row is None:
                    continue
                try:
                    self._fence(row, t)
                except Refused:
                    self.refused += 1
                    continue
                hints.append(self._write_partition(row, t, stamp))
                ok[i] = True
            return hints

        self._commit(work)
        return ok

    def _fence(self, row: Partition, t: Transition) -> None:
        if row.attempt != t.claim.attempt or row.host_id != t.claim.host_id:
            log.warning("refused stale write %s→%s for P%d of %s: claim attempt %d on host %s, row has attempt %d "
                        "on host %s", row.state, t.target, row.index, row.job.job_id, t.claim.attempt,
                        t.claim.host_id, row.attempt, row.host_id, extra=about(row.job.job_id, row.index, self.host.name))
            raise Refused(f"stale claim: attempt {t.claim.attempt}, row at {row.attempt}")
        try:
            check_partition_transition(row.state, self._resolved_target(row, t))
        except TransitionError as exc:
            log.info("refused %s for P%d of %s: %s", t.target, row.index, row.job.job_id, exc,
                     extra=about(row.job.job_id, row.index, self.host.name))
            raise Refused(str(exc)) from None

    def _resolved_target(self, row: Partition, t: Transition) -> str:
        """A retryable failure with attempts left goes back to pending instead of failed."""
        if t.target == P.FAILED and t.retryable:
            if failures_since_retry(row.errors) + 1 < self.max_attempts:
                return P.PENDING
        return t.target

    def _write_partition(self, row: Partition, t: Transition, stamp: Stamp) -> dict[str, Any]:
        target = self._resolved_target(row, t)
        before = [getattr(row, name) for name in _PARTITION_COLUMNS]
        if target == P.GPU:
            row.gpu_finished_at = None  # a new attempt's interval: the last one's end is not its
            row.batch = ""  # alone unless this transition names its batch
        for name, value in t.fields.items():
            setattr(row, name, value)
        if t.written_at:
            now = timezone.now()
            for name in t.written_at:
                setattr(row, name, now)
        if target != P.GPU:
            close_gpu_interval(row)
        if t.target == P.FAILED:
            row.errors = [*row.errors, error_entry(row.attempt, self.host.name, t.reason)]
            row.error = t.reason
        if target == P.PENDING:
            release_claim(row, "failed", t.reason)
        if target in PARTITION_TERMINAL:
            row.finished_at = row.finished_at or timezone.now()
            row.lease_expires_at = None
        if log.isEnabledFor(logging.DEBUG):  # said once committed: the job log must not keep a rolled-back step
            job_id = self._job_name(row)
            args, fields = (stamp.version, row.index, job_id, row.state, target), about(job_id, row.index, self.host.name)
            transaction.on_commit(lambda: log.debug("v%d P%d of %s %s → %s", *args, extra=fields))
        row.state = target
        stamp.put(row)
        # The columns this transition changed, not all 37: a whole row's UPDATE (its JSON columns
        # encoded again) was most of a transition's cost. Every change here assigns a new value,
        # so a column left out is one whose value is the one read under the row's lock.
        write_columns(row, [name for name, was in zip(_PARTITION_COLUMNS, before, strict=True)
                            if getattr(row, name) != was])
        return {"job": self._job_name(row), "partition": row.index}

    def _job_name(self, row: Partition) -> str:
        """The id of a partition's job, read once per job: a job's id never changes, and the
        job's whole row (its inputs decoded) read with every transition was a third of one."""
        name = self._job_names.get(row.job_id)
        if name is None:
            if len(self._job_names) >= 4096:
                self._job_names.clear()
            name = self._job_names[row.job_id] = ProofJob.objects.values_list("job_id", flat=True).get(pk=row.job_id)
        return name

    # -- claims, hand-backs and host rows ------------------------------------------------

    def claim(self, limit: int = 1, refused: Collection[str] = ()) -> list[Claim]:
        claims: list[Claim] = []
        claimed: list[tuple[str, int, int]] = []  # (job id, index, attempt), for the log once committed

        def work(stamp: Stamp) -> list[dict[str, Any]]:
            rows = claim_partitions(self.host, limit, stamp, refused)
            # a deadlock's retry runs this again from the start: what it returns replaces, not adds
            claims[:] = [Claim(r.pk, r.attempt, self.host.pk) for r in rows]
            claimed[:] = [(r.job.job_id, r.index, r.attempt) for r in rows]
            return [{"job": r.job.job_id, "partition": r.index} for r in rows]

        if limit > 0 and self._commit_if(work):
            for job_id, index, attempt in claimed:
                progress.info("claimed P%d of %s on %s (attempt %d)", index, job_id, self.host.name, attempt,
                         extra=about(job_id, index, self.host.name))
        return claims

    def _commit_if(self, work: Callable[[Stamp], list[dict[str, Any]]]) -> bool:
        """Like _commit, but rolls back (no version spent) when ``work`` changed nothing."""

        class Nothing(Exception):
            pass

        def guarded(stamp: Stamp) -> list[dict[str, Any]]:
            hints = work(stamp)
            if not hints:
                raise Nothing
            return hints

        try:
            self._commit(guarded)
        except Nothing:
            return False
        return True

    def hand_back(self, claim: Claim, reason: str) -> bool:
        """Return a claimed partition to the queue without counting a failure (drain)."""

        def work(stamp: Stamp) -> list[dict[str, Any]]:
            row = Partition.objects.select_for_update(of=("self",)).select_related("job").get(pk=claim.partition_id)
            if row.attempt != claim.attempt or row.host_id != claim.host_id or row.state in PARTITION_TERMINAL:
                return []
            row.errors = [*row.errors, error_entry(row.attempt, self.host.name, reason, handed_back=True)]
            close_gpu_interval(row)
            release_claim(row, "handed back", reason)
            row.state = P.PENDING
            stamp.put(row)
            row.save()
            announce_new_work()  # another host may take it now
            handed[:] = [(row.job.job_id, row.index)]
            return [{"job": row.job.job_id, "partition": row.index}]

        handed: list[tuple[str, int]] = []
        if not self._commit_if(work):
            return False
        for job_id, index in handed:
            log.info("%s handed back P%d of %s: %s", self.host.name, index, job_id, reason,
                     extra=about(job_id, index, self.host.name))
        return True

    def update_host(self, **fields: Any) -> int:
        def work(stamp: Stamp) -> list[dict[str, Any]]:
            EngineHost.objects.filter(pk=self.host.pk).update(**stamp.fields(), **fields)
            return [{}]

        return self._commit(work)

    def record_stopped(self) -> int:
        """The host has stopped: no keys held, and the operators' requests it had not carried
        out failed, in the same transaction (a request never waits on a stopped host)."""
        def work(stamp: Stamp) -> list[dict[str, Any]]:
            EngineHost.objects.filter(pk=self.host.pk).update(**stamp.fields(), stopped_at=timezone.now(),
                                                              key_cache=[], reserved_by_engine={}, device_reserved={})
            failed = fail_pending_of_stopped(self.host.pk)
            if failed:
                log.warning("%s stopped with %d key request(s) not carried out: failed", self.host.name, failed)
            return [{}]

        return self._commit(work)

    def mark_free(self) -> None:
        """The host asked for work with room to spare (engine.ledger.placement): liveness like a
        heartbeat, no version, and written at most every quarter of the wait (at most 4 a
        second), so an idle host's polling is not a stream of writes."""
        if not placement.enabled():
            return
        now = time.monotonic()
        if now - self._free_marked < max(placement.wait_seconds() / 4, 0.25):
            return
        EngineHost.objects.filter(pk=self.host.pk).update(free_at=timezone.now())
        self._free_marked = now

    def beat(self, **fields: Any) -> None:
        """The host is alive (``heartbeat_at``) and its devices' samples: liveness, not a
        transition, so no version is taken (the status clock is not every heartbeat's lock);
        a hint tells consoles to re-read the host's panels."""
        EngineHost.objects.filter(pk=self.host.pk).update(**fields)
        publish_hint(host=self.host.name)

    def requeue_lapsed(self) -> int:
        """Take back partitions whose host stopped renewing its lease (any host may do it)."""
        if not any_lapsed():
            return 0
        count: list[int] = []

        def work(stamp: Stamp) -> list[dict[str, Any]]:
            hints = requeue_lapsed_rows(stamp, self.max_attempts, self.host.name)
            count[:] = [len(hints)]  # a deadlock's retry starts over
            if hints:
                announce_new_work()
            return hints

        self._commit_if(work)
        return count[0] if count else 0


