"""The job log: the engines' last log lines about each job, kept for the job's page.

A log line about a job carries it as structured fields, ``log.info(..., extra=about(job_id,
partition, host))``; the engine's handler (engine.pipeline.job_log) collects the lines that
carry a job and hands them here in batches. ``append`` writes them and keeps only the newest
``KEEP`` per job: the page shows what happened lately, the engine's own log keeps the rest.

A line is no transition: it takes no status clock and changes no figure, so its hint
(``logged``) moves only the pages of the jobs it names, never a console's panels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from engine.ledger.deadlocks import retried
from engine.ledger.hints import publish_hint
from engine.models import JobLogLine, ProofJob

KEEP = 50  # lines per job
MESSAGE_CHARS = 2000  # a runaway message (a client's error text) does not fill the table


@dataclass(frozen=True)
class Line:
    """One log line about a job, as the engine logged it."""

    job: str  # the client's job id
    at: datetime
    level: str
    message: str
    host: str = ""
    partition: int | None = None


def about(job: str, partition: int | None = None, host: str | None = None) -> dict[str, Any]:
    """The structured fields of a log line about ``job`` (and one of its partitions), for
    ``extra=``: the job log keeps exactly the lines that carry them."""
    return {"job": job, "partition": partition, "host": host}


def append(lines: Sequence[Line], keep: int = KEEP) -> int:
    """Record ``lines`` (those of jobs that exist) and trim each job they name to its newest
    ``keep``; returns how many were written. One transaction, run again on a deadlock."""
    if not lines:
        return 0
    jobs = dict(ProofJob.objects.filter(job_id__in={line.job for line in lines}).values_list("job_id", "pk"))
    mine = [line for line in lines if line.job in jobs]  # a job deleted meanwhile has no page
    if not mine:
        return 0

    def once() -> None:
        with transaction.atomic():
            # Built per try: a try rolled back leaves its primary keys on the instances.
            JobLogLine.objects.bulk_create([
                JobLogLine(job_id=jobs[line.job], at=line.at, level=line.level[:10], host=line.host[:200],
                           partition=line.partition, message=line.message[:MESSAGE_CHARS]) for line in mine])
            for pk in sorted({jobs[line.job] for line in mine}):  # one order, so two hosts' trims queue
                _trim(pk, keep)

    retried(once)
    hosts = {line.host for line in mine if line.host}
    publish_hint(host=hosts.pop() if len(hosts) == 1 else None, logged=sorted({line.job for line in mine}))
    return len(mine)


def _trim(job_pk: int, keep: int) -> None:
    """Drop the job's lines older than its newest ``keep`` (lines are numbered as appended)."""
    oldest_kept = list(JobLogLine.objects.filter(job_id=job_pk).order_by("-pk").values_list("pk", flat=True)[keep - 1:keep])
    if oldest_kept:
        JobLogLine.objects.filter(job_id=job_pk, pk__lt=oldest_kept[0]).delete()
