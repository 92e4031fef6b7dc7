"""A job's outcome, derived from its partitions inside the writing transaction.

A job is done when every partition is; it fails with its first failed partition's reason
(the others are cancelled so their memory and GPU time go free). Each failure is kept in
the partition's error history; ``failures_since_retry`` counts the attempts MAX_ATTEMPTS
limits (hand-backs on drain are not failures; an operator's retry restarts the count).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from engine.format import fmt_ms
from engine.ledger.bound import Bound
from engine.ledger.callbacks import owe as owe_callback
from engine.ledger.claims import close_gpu_interval
from engine.ledger.clock import Stamp
from engine.ledger.job_log import about
from engine.models import Partition, ProofJob
from engine.states import JOB_TERMINAL, PARTITION_TERMINAL, JobState, PartitionState, check_job_transition

log = logging.getLogger("engine.ledger")
P = PartitionState
J = JobState


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


# Every partition that ends runs these two; compiled once (engine.ledger.bound).
_JOB_STATE = Bound(lambda shape, values: ProofJob.objects.select_for_update().filter(pk=values[0])
                   .values_list("state"))
_STATES = Bound(lambda shape, values: Partition.objects.select_for_update().filter(job_id=values[0])
                .values_list("state"))


def settle_job(job: ProofJob, stamp: Stamp, max_attempts: int, host: str = "") -> list[dict[str, Any]]:
    """Derive the job's state from its partitions, in the caller's transaction; ``host``, the
    engine host settling it, is named in the outcome's line of the job log."""
    found = _JOB_STATE.rows((), (job.pk,))
    if not found:
        raise ProofJob.DoesNotExist(f"no job {job.pk}")
    if found[0][0] in JOB_TERMINAL:
        return []
    # The states first (every row locked): most partitions that end leave their job running,
    # and reading each row whole (its proof decoded) at every end made a job's settling
    # quadratic in its partitions. The job's whole row (its inputs decoded) only when it ends.
    states = [state for (state,) in _STATES.rows((), (job.pk,))]
    if P.FAILED not in states and any(state != P.DONE for state in states):
        return []
    job = ProofJob.objects.get(pk=job.pk)  # locked above
    parts = list(Partition.objects.filter(job=job).order_by("index"))  # locked above
    failed = [p for p in parts if p.state == P.FAILED]
    if failed:
        return _fail_job(job, parts, failed[0], stamp, host)
    return _finish_job(job, parts, stamp, host)


def _finish_job(job: ProofJob, parts: list[Partition], stamp: Stamp, host: str) -> list[dict[str, Any]]:
    # One job, one verifying key: hosts that made their own keys would hand a client proofs
    # that no single key verifies.
    keys = sorted({p.vk_digest for p in parts})
    if len(keys) > 1:
        named = ", ".join(key[:16] or "(none)" for key in keys)
        return _close_job(job, J.FAILED, stamp, host, error=f"its partitions verified under {len(keys)} different "
                          f"verifying keys ({named}): the hosts do not share one params directory")
    return _close_job(job, J.DONE, stamp, host, proof=[p.proof for p in parts],
                      public_inputs=[p.public_inputs for p in parts], verified=True, vk_digest=keys[0])


def _fail_job(job: ProofJob, parts: list[Partition], bad: Partition, stamp: Stamp, host: str) -> list[dict[str, Any]]:
    # The job is lost anyway: stop its other partitions so their memory and GPU time go free.
    now = timezone.now()
    for p in parts:
        if p.state not in PARTITION_TERMINAL:
            close_gpu_interval(p, now)
            p.state, p.error, p.lease_expires_at, p.finished_at = P.CANCELLED, f"job failed at partition {bad.index}", None, now
            stamp.put(p)
            p.save()
    return _close_job(job, J.FAILED, stamp, host, error=failure_text(bad.index, bad.error, bad.errors))


def failure_text(index: int, reason: str, errors: list[dict[str, Any]]) -> str:
    """Why a job failed, each reason said once: the last attempt's, then any other the attempts
    since the last retry met (hand-backs on drain are not attempts)."""
    attempts: list[dict[str, Any]] = []
    for entry in errors:
        if entry.get("retry"):
            attempts = []
        elif not entry.get("handed_back"):
            attempts.append(entry)
    head = f"partition {index} failed" + (f" after {len(attempts)} attempts" if len(attempts) > 1 else "")
    others = [f"attempt {e.get('attempt')}: {e.get('reason')}" for e in attempts if e.get("reason") != reason]
    return f"{head}: {reason}" + (f" (before that, {'; '.join(others)})" if others else "")


def _close_job(job: ProofJob, target: str, stamp: Stamp, host: str, **fields: Any) -> list[dict[str, Any]]:
    check_job_transition(job.state, target)
    for name, value in fields.items():
        setattr(job, name, value)
    job.state = target
    job.finished_at = timezone.now()
    stamp.put(job)
    job.save()
    owe_callback(job)
    _log_summary(job, host)
    return [{"job": job.job_id}]


def _log_summary(job: ProofJob, host: str) -> None:
    """Logged once the outcome is durable: a write that rolls back (or a host killed before its
    commit, whose job another host then finishes) must not leave a "job done" line behind."""
    # engine.figures' JOB_QUEUE and TOTAL, written as every page writes durations
    args = (job.state, job.kind, job.job_id, job.num_partitions, fmt_ms(job.queue_ms), fmt_ms(job.total_ms),
            f" — {job.error}" if job.error else "")
    fields = about(job.job_id, host=host or None)
    transaction.on_commit(lambda: log.info("job %s %s %s: %d partition(s), job queue %s, total %s%s", *args,
                                           extra=fields))
