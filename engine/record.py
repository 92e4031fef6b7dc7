"""THE status writer: every change of a partition's or a job's state passes through here.

One writer per host applies `Transition` requests under one lock, checks each against the
state machine (engine.states), fences it against the claim it was made under, stamps it
with the next farm-wide version (StatusClock, incremented in the same transaction), commits,
and only then publishes a "status.changed" hint on the channel layer. The console and /status
read the records; hints only say where to look, so a dropped hint costs a refresh, not truth.

Fencing: a claim bumps a partition's ``attempt``. A write carries the attempt (and host) it was
made under; if the row has moved on (requeued, claimed elsewhere, cancelled) the write is
refused and logged, so a stale worker can never overwrite newer truth.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob, StatusClock
from engine.states import (
    JOB_TERMINAL,
    PARTITION_TERMINAL,
    JobState,
    PartitionState,
    TransitionError,
    check_job_transition,
    check_partition_transition,
)

GROUP = "provingsite.status"
CLOCK_PK = 1
log = logging.getLogger("engine.record")

P = PartitionState
J = JobState


# ---- the farm-wide version -----------------------------------------------------------


def ensure_clock() -> None:
    StatusClock.objects.get_or_create(pk=CLOCK_PK, defaults={"value": 0})


def next_version() -> int:
    """Increment the clock; call inside the transaction whose rows the version stamps.

    The UPDATE takes the clock row's lock until commit, so versions follow commit order
    across every host and the web process.
    """
    if StatusClock.objects.filter(pk=CLOCK_PK).update(value=F("value") + 1) == 0:
        StatusClock.objects.get_or_create(pk=CLOCK_PK, defaults={"value": 0})
        StatusClock.objects.filter(pk=CLOCK_PK).update(value=F("value") + 1)
    return int(StatusClock.objects.values_list("value", flat=True).get(pk=CLOCK_PK))


def current_version() -> int:
    return int(StatusClock.objects.filter(pk=CLOCK_PK).values_list("value", flat=True).first() or 0)


# ---- hints ---------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None


def set_event_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Embedded mode: Daphne's loop owns the in-memory layer; sends are handed to it."""
    global _loop
    _loop = loop


def publish_hint(**fields: Any) -> None:
    """Send {"type": "status.changed", host, job, partition, version} to GROUP. Never raises."""
    message = {"type": "status.changed", "host": fields.get("host"), "job": fields.get("job"),
               "partition": fields.get("partition"), "version": fields.get("version")}
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        loop = _loop
        if loop is not None and loop.is_running():
            # The in-memory layer's queues belong to Daphne's loop: send from there.
            asyncio.run_coroutine_threadsafe(layer.group_send(GROUP, message), loop)
            return
        from asgiref.sync import async_to_sync

        async_to_sync(layer.group_send)(GROUP, message)
    except Exception as exc:  # hints are best effort: the records already hold the truth
        log.debug("hint not sent (%s): %s", exc, message)


# ---- transitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """What a host holds: the partition row and the fencing token it was claimed under."""

    partition_id: int
    attempt: int
    host_id: int


@dataclass
class Transition:
    """Move one claimed partition to ``target``; ``fields`` are set on the row too."""

    claim: Claim
    target: str
    fields: dict[str, Any] = field(default_factory=dict)
    # For target FAILED: the reason, and whether another attempt may fix it.
    reason: str = ""
    retryable: bool = False


class Refused(Exception):
    """A write the records no longer allow (stale claim or a state the machine forbids)."""


def failures_since_retry(errors: list[dict[str, Any]]) -> int:
    """Failed attempts since the last explicit retry (drain hand-backs are not failures)."""
    count = 0
    for entry in errors:
        if entry.get("retry"):
            count = 0
        elif not entry.get("handed_back"):
            count += 1
    return count


def error_entry(attempt: int, host: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"attempt": attempt, "host": host, "at": timezone.now().isoformat(), "reason": reason, **extra}


class StatusWriter:
    """The one writer of a host. Thread-safe: callers from any engine thread share its lock."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host
        self.lock = threading.Lock()
        self.max_attempts = int(settings.PROVINGSITE["MAX_ATTEMPTS"])
        self.refused = 0
        self.busy_s = 0.0  # seconds spent writing records (the engine's own overhead)
        self.listeners: list[Callable[[int], None]] = []  # called with each committed version
        ensure_clock()

    # -- the one path every write takes --------------------------------------------------

    def _commit(self, work: Callable[[int], Iterable[dict[str, Any]]]) -> int:
        """Run ``work(version)`` in one transaction under the lock; publish its hints after."""
        with self.lock:
            started = time.perf_counter()
            try:
                with transaction.atomic():
                    version = next_version()
                    hints = list(work(version))
            finally:
                self.busy_s += time.perf_counter() - started
            for listener in self.listeners:
                listener(version)
        for hint in hints:
            publish_hint(host=self.host.name, version=version, **hint)
        return version

    def apply(self, t: Transition) -> int:
        """Apply one transition; returns its version, raises Refused when fenced or illegal."""

        def work(version: int) -> list[dict[str, Any]]:
            row = Partition.objects.select_for_update().select_related("job").get(pk=t.claim.partition_id)
            self._fence(row, t)
            hints = [self._write_partition(row, t, version)]
            if row.state in PARTITION_TERMINAL:  # only an ending partition can end its job
                hints += self._settle_job(row.job, version)
            return hints

        try:
            return self._commit(work)
        except Refused:
            self.refused += 1
            raise

    def _fence(self, row: Partition, t: Transition) -> None:
        if row.attempt != t.claim.attempt or row.host_id != t.claim.host_id:
            log.warning("refused stale write %s→%s for P%d of %s: claim attempt %d on host %s, row has attempt %d "
                        "on host %s", row.state, t.target, row.index, row.job.job_id, t.claim.attempt,
                        t.claim.host_id, row.attempt, row.host_id)
            raise Refused(f"stale claim: attempt {t.claim.attempt}, row at {row.attempt}")
        try:
            check_partition_transition(row.state, self._resolved_target(row, t))
        except TransitionError as exc:
            log.info("refused %s for P%d of %s: %s", t.target, row.index, row.job.job_id, exc)
            raise Refused(str(exc)) from None

    def _resolved_target(self, row: Partition, t: Transition) -> str:
        """A retryable failure with attempts left goes back to pending instead of failed."""
        if t.target == P.FAILED and t.retryable:
            if failures_since_retry(row.errors) + 1 < self.max_attempts:
                return P.PENDING
        return t.target

    def _write_partition(self, row: Partition, t: Transition, version: int) -> dict[str, Any]:
        target = self._resolved_target(row, t)
        for name, value in t.fields.items():
            setattr(row, name, value)
        if t.target == P.FAILED:
            row.errors = [*row.errors, error_entry(row.attempt, self.host.name, t.reason)]
            row.error = t.reason
        if target == P.PENDING:
            _release_claim(row)
        if target in PARTITION_TERMINAL:
            row.finished_at = row.finished_at or timezone.now()
            row.lease_expires_at = None
        log.debug("v%d P%d of %s %s → %s", version, row.index, row.job.job_id, row.state, target)
        row.state = target
        row.version = version
        row.save()
        return {"job": row.job.job_id, "partition": row.index}

    def _settle_job(self, job: ProofJob, version: int) -> list[dict[str, Any]]:
        return settle_job(job, version, self.max_attempts)

    # -- claims, hand-backs and host rows ------------------------------------------------

    def claim(self, limit: int = 1) -> list[Claim]:
        from engine.claim import claim_partitions

        claims: list[Claim] = []

        def work(version: int) -> list[dict[str, Any]]:
            rows = claim_partitions(self.host, limit, version)
            claims.extend(Claim(r.pk, r.attempt, self.host.pk) for r in rows)
            return [{"job": r.job.job_id, "partition": r.index} for r in rows]

        if limit > 0:
            self._commit_if(work)
        return claims

    def _commit_if(self, work: Callable[[int], list[dict[str, Any]]]) -> bool:
        """Like _commit, but rolls back (no version spent) when ``work`` changed nothing."""

        class Nothing(Exception):
            pass

        def guarded(version: int) -> list[dict[str, Any]]:
            hints = work(version)
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

        def work(version: int) -> list[dict[str, Any]]:
            row = Partition.objects.select_for_update().select_related("job").get(pk=claim.partition_id)
            if row.attempt != claim.attempt or row.host_id != claim.host_id or row.state in PARTITION_TERMINAL:
                return []
            row.errors = [*row.errors, error_entry(row.attempt, self.host.name, reason, handed_back=True)]
            _release_claim(row)
            row.state = P.PENDING
            row.version = version
            row.save()
            return [{"job": row.job.job_id, "partition": row.index}]

        return self._commit_if(work)

    def update_host(self, **fields: Any) -> int:
        def work(version: int) -> list[dict[str, Any]]:
            EngineHost.objects.filter(pk=self.host.pk).update(version=version, **fields)
            return [{}]

        return self._commit(work)

    def requeue_lapsed(self) -> int:
        """Take back partitions whose host stopped renewing its lease (any host may do it)."""
        from engine.heartbeat import requeue_lapsed_rows

        count: list[int] = []

        def work(version: int) -> list[dict[str, Any]]:
            hints = requeue_lapsed_rows(version, self.max_attempts, self.host.name)
            count.append(len(hints))
            return hints

        self._commit_if(work)
        return count[0] if count else 0


def _release_claim(row: Partition) -> None:
    """Back to the queue: no host, no worker, no lease; the attempt stays (it is the fence)."""
    row.host = None
    row.worker = None
    row.lease_expires_at = None
    row.reserved_bytes = 0


# ---- job outcome ---------------------------------------------------------------------


def settle_job(job: ProofJob, version: int, max_attempts: int) -> list[dict[str, Any]]:
    """Derive the job's state from its partitions, in the caller's transaction."""
    job = ProofJob.objects.select_for_update().get(pk=job.pk)
    if job.state in JOB_TERMINAL:
        return []
    parts = list(Partition.objects.select_for_update().filter(job=job).order_by("index"))
    failed = [p for p in parts if p.state == P.FAILED]
    if failed:
        return _fail_job(job, parts, failed[0], version)
    if all(p.state == P.DONE for p in parts):
        return _finish_job(job, parts, version)
    return []


def _finish_job(job: ProofJob, parts: list[Partition], version: int) -> list[dict[str, Any]]:
    check_job_transition(job.state, J.DONE)
    job.state = J.DONE
    job.proof = [p.proof for p in parts]
    job.public_inputs = [p.public_inputs for p in parts]
    job.verified = True
    job.finished_at = timezone.now()
    job.version = version
    job.save()
    _log_summary(job)
    return [{"job": job.job_id}]


def _fail_job(job: ProofJob, parts: list[Partition], bad: Partition, version: int) -> list[dict[str, Any]]:
    reasons = "; ".join(f"attempt {e.get('attempt')}: {e.get('reason')}" for e in bad.errors if not e.get("retry"))
    check_job_transition(job.state, J.FAILED)
    job.state = J.FAILED
    job.error = f"partition {bad.index} failed: {bad.error} (history: {reasons})"
    job.finished_at = timezone.now()
    job.version = version
    job.save()
    # The job is lost anyway: stop its other partitions so their memory and GPU time go free.
    for p in parts:
        if p.state not in PARTITION_TERMINAL:
            p.state = P.CANCELLED
            p.error = f"job failed at partition {bad.index}"
            p.lease_expires_at = None
            p.finished_at = timezone.now()
            p.version = version
            p.save()
    _log_summary(job)
    return [{"job": job.job_id}]


def _log_summary(job: ProofJob) -> None:
    """Logged once the outcome is durable: a write that rolls back (or a host killed before its
    commit, whose job another host then finishes) must not leave a "job done" line behind."""
    queue = _seconds(job.submitted_at, job.started_at)
    total = _seconds(job.submitted_at, job.finished_at)
    args = (job.state, job.kind, job.job_id, job.num_partitions, queue, total, f" — {job.error}" if job.error else "")
    transaction.on_commit(lambda: log.info("job %s %s %s: %d partition(s), queue %.2fs, total %.2fs%s", *args))


def _seconds(start: datetime | None, end: datetime | None) -> float:
    return (end - start).total_seconds() if start and end else 0.0
