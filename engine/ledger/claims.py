"""Claiming queued work: jobs by priority then submission time, then the oldest job's
partitions lowest index first.

One code path for every database: ``select_for_update(skip_locked=True)`` becomes
``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL, so engines on several hosts never claim
the same row and never wait on each other; SQLite ignores it (its IMMEDIATE transactions
serialise writers, which is right for the single-host default).

The order they are served in is engine.ledger.order's. A claim moves the partition from
``pending`` (unclaimed, and only that) to ``reserving``: the host holds it and is getting its
key and memory. Each claim bumps ``attempt`` — the fencing token every later write is checked
against — and sets the host and the lease the heartbeat renews.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from engine.ledger import placement
from engine.ledger.clock import Stamp
from engine.ledger.locked import write_columns
from engine.ledger.order import claim_order
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState


@dataclass(frozen=True)
class Claim:
    """What a host holds: the partition row and the fencing token it was claimed under."""

    partition_id: int
    attempt: int
    host_id: int


def lease_deadline() -> datetime:
    return timezone.now() + timedelta(seconds=float(settings.PROVINGSITE["LEASE_SECONDS"]))


def claim_partitions(host: EngineHost, limit: int, stamp: Stamp, refused: Collection[str] = ()) -> list[Partition]:
    """Claim up to ``limit`` partitions for ``host``, none of a circuit in ``refused`` (the host
    has no key for it, or not the farm's); call inside a transaction."""
    order = claim_order(refused)
    now = timezone.now()
    if placement.enabled():  # by which keys each host holds (engine.ledger.placement)
        rows = placement.placed(host.pk, refused, limit, now)
    else:  # first come, first served
        # of=("self",): lock the partition rows only, never the job rows other hosts also read.
        rows = list(order.select_for_update(skip_locked=True, of=("self",)).select_related("job")[:limit])
    lease = lease_deadline()
    for row in rows:
        row.attempt += 1
        row.state = PartitionState.RESERVING
        row.host = host
        row.lease_expires_at = lease
        row.claimed_at = now
        row.error = ""
        stamp.put(row)
        write_columns(row, ["attempt", "state", "host_id", "lease_expires_at", "claimed_at", "error", "clock", "version",
                            "revision"])
        if row.job.state == JobState.QUEUED:  # as the claim read it: a running job stays running
            _start_job(row.job, host, now, stamp)
    return rows


def _start_job(job: ProofJob, host: EngineHost, now: datetime, stamp: Stamp) -> None:
    """queued → running on the first claim. A claim holds partition locks, so it must not wait
    for the job's: its holder is another claim (which starts the job) or a cancel (which then
    waits for this claim's partitions and cancels them), and waiting could close a cycle."""
    queued = ProofJob.objects.filter(pk=job.pk, state=JobState.QUEUED).select_for_update(skip_locked=True)
    ProofJob.objects.filter(pk__in=list(queued.values_list("pk", flat=True))).update(
        state=JobState.RUNNING, started_at=now, host=host, **stamp.fields())


def close_gpu_interval(row: Partition, now: Any = None) -> None:
    """A partition leaving ``gpu`` by any way (finished, failed, cancelled, lapsed, handed back)
    ends its GPU interval, so no reader counts a worker busy after it left. Call before the
    row's state changes; the caller saves the row."""
    if row.state == PartitionState.GPU and row.gpu_finished_at is None:
        row.gpu_finished_at = now or timezone.now()


# The moments of an attempt, kept on the partition when it ends and the next begins.
ATTEMPT_MOMENTS = ("claimed_at", "synth_started_at", "synth_finished_at", "gpu_started_at", "gpu_finished_at")


def release_claim(row: Partition, ended: str | None = None, reason: str = "", now: datetime | None = None) -> None:
    """No host, no worker, no lease, nothing reserved. The attempt stays: it is the fencing
    token and only ever grows. The caller saves the row.

    ``ended`` (how the attempt ended: "failed", "lapsed", "handed back", or the state an
    operator's retry found) when the partition goes back to the queue for another attempt:
    the ended attempt's moments are kept in ``attempts`` and cleared from the row, whose own
    are then the next attempt's alone, queued from now (``requeued_at``)."""
    if ended is not None:
        now = now or timezone.now()
        if row.claimed_at is not None:  # it was claimed: an attempt to keep
            row.attempts = [*row.attempts, {
                "attempt": row.attempt, "host": row.host.name if row.host is not None else None,
                "worker": f"W{row.worker.ordinal} {row.worker.device}" if row.worker is not None else None,
                "queued_at": _iso(row.requeued_at), **{name: _iso(getattr(row, name)) for name in ATTEMPT_MOMENTS},
                "ended_at": _iso(row.finished_at or now), "ended": ended, "reason": reason}]
        for name in ATTEMPT_MOMENTS:
            setattr(row, name, None)
        row.requeued_at = now
    row.host = None
    row.worker = None
    row.lease_expires_at = None
    row.reserved_bytes = 0


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
