"""What a client or an operator asks of a job: submit it, cancel it, retry it.

Submitting makes one job row and its partitions, idempotent on job_id. Cancel and retry
write the records directly (with a fresh version, then a hint), from whichever process asks
— the admin, the API, the console, the commands. Engines learn of a cancel within a fraction
of a second: their sweeper re-reads the partitions they hold, drops the cancelled ones and
frees their memory, and every later write for them is refused by the state machine anyway.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from engine.ledger.callbacks import owe as owe_callback
from engine.ledger.claims import release_claim
from engine.ledger.clock import next_stamp
from engine.ledger.deadlocks import retried
from engine.ledger.hints import publish_hint
from engine.ledger.new_work import announce_new_work
from engine.ledger.settle import settle_job
from engine.models import ApiToken, EngineHost, Partition, ProofJob
from engine.states import (
    JOB_ACTIVE,
    KIND_PRIORITY,
    PARTITION_TERMINAL,
    Curve,
    JobState,
    PartitionState,
    Priority,
    ProofKind,
)

P = PartitionState
J = JobState


class JobConflict(Exception):
    """A job with this id exists and was asked for something else."""

    def __init__(self, job: ProofJob) -> None:
        super().__init__(f"job id {job.job_id!r} is already used by a different request")
        self.job = job


def request_digest(kind: str, inputs: dict[str, Any], priority: int | None, curve: str) -> str:
    canonical = json.dumps({"kind": kind, "inputs": inputs, "priority": priority, "curve": curve},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def submit_job(
    *,
    kind: str,
    job_id: str,
    inputs: dict[str, Any],
    num_partitions: int,
    circuit_id: str = "",
    scale: str = "",
    priority: int | None = None,
    curve: str = Curve.BLS12_381,
    client: ApiToken | None = None,
    upload_dir: str = "",
    deadline: datetime | None = None,
    latest_start_at: datetime | None = None,
    callback_url: str = "",
    priority_cap: int = Priority.CRITICAL,
) -> tuple[ProofJob, bool]:
    """Create the job and its pending partitions; returns (job, created).

    Without a ``priority`` the job gets its kind's, but never above ``priority_cap`` (the
    asking token's limit); the request's digest keeps what was asked for.

    Inputs must already be validated (engine.circuits.kinds does that for the built-in kinds).
    The same request twice returns the first job; a different request under the same id
    raises JobConflict, because two requests sharing an id once mixed partitions into
    invalid proofs.
    """
    if kind not in ProofKind.values:
        raise ValueError(f"unknown kind {kind!r}")
    digest = request_digest(kind, inputs, priority, curve)
    existing = ProofJob.objects.filter(job_id=job_id).first()
    if existing is not None:
        return _same_or_conflict(existing, digest)
    try:
        with transaction.atomic():
            job = ProofJob.objects.create(
                job_id=job_id, kind=kind, inputs=inputs, curve=curve, circuit_id=circuit_id, scale=scale,
                priority=max(KIND_PRIORITY[kind], priority_cap) if priority is None else priority,
                num_partitions=num_partitions, request_digest=digest, client=client, upload_dir=upload_dir,
                deadline=deadline, latest_start_at=latest_start_at, callback_url=callback_url,
            )
            Partition.objects.bulk_create(Partition(job=job, index=i) for i in range(num_partitions))
            announce_new_work()
    except IntegrityError:
        # Another submitter won the race for this id.
        return _same_or_conflict(ProofJob.objects.get(job_id=job_id), digest)
    _hint_new_work(job)
    return job, True


def _same_or_conflict(job: ProofJob, digest: str) -> tuple[ProofJob, bool]:
    if job.request_digest != digest:
        raise JobConflict(job)
    return job, False


def _hint_new_work(job: ProofJob) -> None:
    """Tell consoles a job arrived. Best effort: the records are the truth."""
    publish_hint(job=job.job_id)


def cancel_job(job: ProofJob) -> bool:
    """Cancel a queued or running job and every partition not yet finished; False when the job
    had already ended (nothing changed)."""
    version = retried(lambda: _cancel(job))
    if version is not None:
        publish_hint(job=job.job_id, version=version)
    return version is not None


def _cancel(job: ProofJob) -> int | None:
    with transaction.atomic():
        # The clock first, then the job, then its partitions: the order every writer that
        # needs a job and its partitions takes them in (engine.ledger.deadlocks).
        stamp = next_stamp()
        row = ProofJob.objects.select_for_update().get(pk=job.pk)
        if row.state not in JOB_ACTIVE:
            transaction.set_rollback(True)  # nothing changed: spend no version
            return None
        now = timezone.now()
        row.state = J.CANCELLED
        row.finished_at = now
        row.error = "cancelled"
        stamp.put(row)
        row.save()
        owe_callback(row)
        # a partition cancelled on the GPU ends its interval there (close_gpu_interval, in bulk)
        Partition.objects.filter(job=row, state=P.GPU, gpu_finished_at__isnull=True).update(gpu_finished_at=now)
        Partition.objects.filter(job=row).exclude(state__in=PARTITION_TERMINAL).update(
            state=P.CANCELLED, lease_expires_at=None, finished_at=now, error="job cancelled", **stamp.fields())
    return stamp.version


def retry_job(job: ProofJob) -> bool:
    """Requeue a failed or cancelled job: its unfinished partitions start again (done ones stay);
    False when the job was neither failed nor cancelled (nothing changed)."""
    version = retried(lambda: _retry(job))
    if version is not None:
        publish_hint(job=job.job_id, version=version)
    return version is not None


def _retry(job: ProofJob) -> int | None:
    with transaction.atomic():
        stamp = next_stamp()  # the clock first, as in cancel_job
        row = ProofJob.objects.select_for_update().get(pk=job.pk)
        if row.state not in (J.FAILED, J.CANCELLED):
            transaction.set_rollback(True)
            return None
        now = timezone.now()
        marker: dict[str, Any] = {"retry": True, "at": now.isoformat()}
        for part in Partition.objects.select_for_update().filter(job=row, state__in=(P.FAILED, P.CANCELLED)):
            # The attempt is kept: it is the fencing token and must only grow. The marker
            # restarts the MAX_ATTEMPTS count.
            release_claim(part, str(part.state), part.error, now)
            part.state = P.PENDING
            part.finished_at = None
            part.error = ""
            part.errors = [*part.errors, marker]
            stamp.put(part)
            part.save()
        row.state = J.QUEUED
        row.error = ""
        row.finished_at = None
        # Queued again from now (engine.figures.JOB_QUEUE); it starts again at its next claim.
        row.retried_at, row.started_at = now, None
        stamp.put(row)
        row.save()
        announce_new_work()
        if not Partition.objects.filter(job=row).exclude(state=P.DONE).exists():
            row.state, row.started_at = J.RUNNING, now  # every proof already made: the job completes now
            row.save(update_fields=["state", "started_at"])
            settle_job(row, stamp, max_attempts=1)
    return stamp.version


def set_draining(host: EngineHost, draining: bool) -> bool:
    """Drain a host (it claims nothing new and finishes what it holds) or resume it; False when
    it already was. The engine reads the flag at its next heartbeat."""
    with transaction.atomic():
        stamp = next_stamp()  # the clock first, as in cancel_job
        if not EngineHost.objects.filter(pk=host.pk).exclude(draining=draining).update(draining=draining,
                                                                                      **stamp.fields()):
            transaction.set_rollback(True)
            return False
    publish_hint(host=host.name, version=stamp.version)
    return True


def delete_finished(jobs: QuerySet[ProofJob]) -> int:
    """Delete the jobs of ``jobs`` that no engine works on (the admin's history clean-up).
    The filter is in the DELETE itself: a job that started since the caller looked stays."""
    count, _ = jobs.exclude(state__in=JOB_ACTIVE).delete()
    return int(count)
