"""Deadlines: when a proof is worthless, and how much slack a job has before then.

A job's expected duration is the farm's own record, not a setting: the 95th percentile of how
long its circuit's last jobs took from first claim to done. From it:

* ``latest_start_at`` = deadline − expected duration, fixed at submission: claims serve a
  priority's jobs by least slack (the earliest latest start), then by age;
* a queued or running job is **at risk** when its expected finish (started, or now, plus the
  expected duration) passes its deadline, and **late** once the deadline has passed; it still
  proves. A finished job **missed** its deadline when it finished after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from engine.figures import p95
from engine.models import ProofJob
from engine.moments import STORED_EARLIEST
from engine.states import JOB_ACTIVE, JobState

HISTORY = 50  # recorded jobs per circuit the estimate reads


def default_deadline(kind: str, now: datetime) -> datetime | None:
    """The deadline a job of ``kind`` sent without one gets (PROVINGSITE_DEADLINES), if any."""
    offset = settings.PROVINGSITE["DEADLINE_OFFSETS"].get(kind)
    return None if offset is None else now + timedelta(seconds=offset)


def expected_seconds(circuit_ids: Iterable[str]) -> dict[str, float]:
    """Each circuit's p95 duration (first claim → done) over its last recorded jobs; 0 for a
    circuit the farm has not proved yet (its jobs then have their whole deadline as slack)."""
    out: dict[str, float] = {}
    for circuit_id in set(circuit_ids):
        spans = (ProofJob.objects.filter(circuit_id=circuit_id, state=JobState.DONE, started_at__isnull=False,
                                         finished_at__isnull=False)
                 .order_by("-finished_at").values_list("started_at", "finished_at")[:HISTORY])
        seconds = [(done - started).total_seconds() for started, done in spans if done and started]
        out[circuit_id] = p95(seconds) if seconds else 0.0
    return out


def latest_start(deadline: datetime | None, circuit_id: str) -> datetime | None:
    """The deadline less the circuit's expected duration, never before the earliest moment the
    records hold (a deadline near it, less a long history, once overflowed the year 1)."""
    if deadline is None:
        return None
    expected = timedelta(seconds=expected_seconds([circuit_id])[circuit_id])
    return deadline - expected if deadline - STORED_EARLIEST > expected else STORED_EARLIEST


@dataclass(frozen=True)
class Standing:
    """A job against its deadline, at one moment."""

    deadline: datetime | None
    slack_s: float | None  # deadline − expected finish; negative when at risk
    at_risk: bool
    late: bool
    missed: bool  # finished after its deadline


def standing(job: ProofJob, expected_s: float, now: datetime) -> Standing:
    return standing_of(job.deadline, job.state, job.started_at, job.finished_at, expected_s, now)


def standing_of(deadline: datetime | None, state: str, started_at: datetime | None, finished_at: datetime | None,
                expected_s: float, now: datetime) -> Standing:
    """``standing`` from a job's columns, for readers of plain rows (the status queries)."""
    if deadline is None:
        return Standing(None, None, False, False, False)
    if state not in JOB_ACTIVE:
        missed = finished_at is not None and finished_at > deadline
        return Standing(deadline, None, False, False, missed)
    expected_finish = (started_at or now) + timedelta(seconds=expected_s)
    expected_finish = max(expected_finish, now)
    slack = (deadline - expected_finish).total_seconds()
    late = now > deadline
    return Standing(deadline, slack, at_risk=slack < 0 and not late, late=late, missed=False)


def at_risk_from(deadline: datetime, started_at: datetime | None, expected_s: float) -> datetime | None:
    """When an active job turns at risk as the clock runs, nothing else changing: a queued job
    once less than its expected duration is left (deadline − expected), a started one from its
    start if its expected finish passes the deadline, else never before it is late. Lets a
    display flip the flag between two reads."""
    turns = deadline - timedelta(seconds=expected_s)
    return turns if started_at is None or started_at > turns else None
