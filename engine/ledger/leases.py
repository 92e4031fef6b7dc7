"""Leases: a host's hold on its claims, and the rescue of work whose host went quiet.

Every HEARTBEAT_SECONDS each engine

* writes its host row: the heartbeat's time and its devices' measured memory, nothing else
  (what it holds is derived from its partitions, engine.status.holdings);
* renews the lease of every partition it holds (fenced by attempt: only the claims it has);
* requeues partitions of any host whose lease lapsed: back to pending with the reason
  appended and the attempt counted, or failed once MAX_ATTEMPTS is spent. Every engine runs
  this; ``SKIP LOCKED`` on PostgreSQL and the state re-check under the row lock make two
  rescuers harmless (only one of them finds the row still lapsed).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from engine.ledger.claims import Claim, close_gpu_interval, release_claim
from engine.ledger.clock import Stamp
from engine.ledger.job_log import about
from engine.ledger.settle import error_entry, failures_since_retry, settle_job
from engine.models import Partition
from engine.states import PARTITION_LIVE, PartitionState

log = logging.getLogger("engine.leases")
P = PartitionState
HELD_STATES = tuple(PARTITION_LIVE)


def renew_leases(host_id: int, claims: list[Claim]) -> int:
    """Push out the leases of the claims this host still holds; returns how many."""
    if not claims:
        return 0
    held = Q()
    for c in claims:
        held |= Q(pk=c.partition_id, attempt=c.attempt)
    deadline = timezone.now() + timedelta(seconds=float(settings.PROVINGSITE["LEASE_SECONDS"]))
    return Partition.objects.filter(held, host_id=host_id, state__in=HELD_STATES).update(lease_expires_at=deadline)


def _lapsed() -> QuerySet[Partition]:
    return Partition.objects.filter(state__in=HELD_STATES, host__isnull=False, lease_expires_at__lt=timezone.now())


def any_lapsed() -> bool:
    """Whether some claim's lease has lapsed: asked before taking the status clock, so a
    farm with nothing to rescue does not serialise every host's heartbeat on it."""
    return _lapsed().exists()


def requeue_lapsed_rows(stamp: Stamp, max_attempts: int, rescuer: str, limit: int = 200) -> list[dict[str, Any]]:
    """Inside a transaction: take back every lapsed claim (any host's). Returns hints."""
    rows = list(
        _lapsed()
        .select_for_update(skip_locked=True, of=("self",))
        .select_related("job", "host")[:limit]
    )
    hints: list[dict[str, Any]] = []
    touched_jobs = {}
    for row in rows:
        reason = f"lease lapsed on host {row.host.name if row.host else '?'} during {row.state}"  # the entry names the attempt
        row.errors = [*row.errors, error_entry(row.attempt, rescuer, reason)]
        row.error = reason
        spent = failures_since_retry(row.errors) >= max_attempts
        close_gpu_interval(row)
        row.state = P.FAILED if spent else P.PENDING
        release_claim(row, None if spent else "lapsed", reason)
        if spent:
            row.finished_at = timezone.now()
        stamp.put(row)
        row.save()
        # Said once it is true: a rescue rolled back must not leave "requeued" in the job's log.
        transaction.on_commit(partial(log.warning, "requeued P%d of %s: %s%s", row.index, row.job.job_id, reason,
                                      " — attempts spent, failed" if spent else "",
                                      extra=about(row.job.job_id, row.index, rescuer)))
        hints.append({"job": row.job.job_id, "partition": row.index})
        touched_jobs[row.job.pk] = row.job
    for job in touched_jobs.values():
        hints += settle_job(job, stamp, max_attempts, host=rescuer)
    return hints


def orphaned_by_previous_run(host_id: int) -> int:
    """Claims recorded for this host name by a process that is gone: let them lapse now."""
    return Partition.objects.filter(host_id=host_id, state__in=HELD_STATES).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1))
