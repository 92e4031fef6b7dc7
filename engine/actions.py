"""What an operator or a client may do to a job: cancel it, retry it.

Both write the records directly (with a fresh version, then a hint), from whichever process
asks — the admin, the API. Engines learn of a cancel within a fraction of a second: their
sweeper re-reads the partitions they hold, drops the cancelled ones and frees their memory,
and every later write for them is refused by the state machine anyway.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob
from engine.record import next_version, publish_hint, settle_job
from engine.states import JOB_ACTIVE, PARTITION_TERMINAL, JobState, PartitionState

P = PartitionState
J = JobState


def cancel_job(job: ProofJob) -> None:
    """Cancel a queued or running job and every partition not yet finished."""
    version = 0
    with transaction.atomic():
        # The clock first, then the rows: the order every writer takes its locks in (the
        # engine's writer bumps the clock before it touches a row), so two never deadlock.
        version = next_version()
        row = ProofJob.objects.select_for_update().get(pk=job.pk)
        if row.state not in JOB_ACTIVE:
            transaction.set_rollback(True)  # nothing changed: spend no version
            return
        now = timezone.now()
        row.state = J.CANCELLED
        row.finished_at = now
        row.error = "cancelled"
        row.version = version
        row.save()
        Partition.objects.filter(job=row).exclude(state__in=PARTITION_TERMINAL).update(
            state=P.CANCELLED, lease_expires_at=None, finished_at=now, error="job cancelled", version=version)
    publish_hint(job=job.job_id, version=version)


def retry_job(job: ProofJob) -> None:
    """Requeue a failed or cancelled job: its unfinished partitions start again (done ones stay)."""
    version = 0
    with transaction.atomic():
        version = next_version()  # the clock first, as in cancel_job
        row = ProofJob.objects.select_for_update().get(pk=job.pk)
        if row.state not in (J.FAILED, J.CANCELLED):
            transaction.set_rollback(True)
            return
        marker: dict[str, Any] = {"retry": True, "at": timezone.now().isoformat()}
        for part in Partition.objects.select_for_update().filter(job=row, state__in=(P.FAILED, P.CANCELLED)):
            # The attempt is kept: it is the fencing token and must only grow. The marker
            # restarts the MAX_ATTEMPTS count.
            part.state = P.PENDING
            part.host = None
            part.worker = None
            part.lease_expires_at = None
            part.finished_at = None
            part.error = ""
            part.errors = [*part.errors, marker]
            part.version = version
            part.save()
        row.state = J.QUEUED
        row.error = ""
        row.finished_at = None
        row.version = version
        row.save()
        if not Partition.objects.filter(job=row).exclude(state=P.DONE).exists():
            row.state = J.RUNNING  # every proof already made: the job completes now
            row.save(update_fields=["state"])
            settle_job(row, version, max_attempts=1)
    publish_hint(job=job.job_id, version=version)


def set_draining(host: EngineHost, draining: bool) -> bool:
    """Drain a host (it claims nothing new and finishes what it holds) or resume it; False when
    it already was. The engine reads the flag at its next heartbeat."""
    with transaction.atomic():
        version = next_version()  # the clock first, as in cancel_job
        if not EngineHost.objects.filter(pk=host.pk).exclude(draining=draining).update(draining=draining, version=version):
            transaction.set_rollback(True)
            return False
    publish_hint(host=host.name, version=version)
    return True
