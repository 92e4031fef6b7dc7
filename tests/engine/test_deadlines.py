"""Deadlines: within a priority the least slack is served first, and a job says when it is at
risk of missing its deadline and when it has."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from engine.circuits.kinds import validate_inputs
from engine.ledger.deadlines import expected_seconds, standing
from engine.ledger.demo import demo_inputs
from engine.ledger.submission import Submission, SubmissionRefused, deadline_of, submit
from engine.ledger.tokens import issue_token
from engine.ledger.writer import StatusWriter
from engine.models import Partition, ProofJob
from engine.states import JobState, Priority
from tests.engine.conftest import wait_until


def job(kind: str, job_id: str, deadline_in: float | None = None, priority: int | None = None) -> ProofJob:
    inputs, n = validate_inputs(kind, demo_inputs(kind, window_partitions=1))
    deadline = None if deadline_in is None else timezone.now() + timedelta(seconds=deadline_in)
    made, _ = submit(Submission(kind=kind, job_id=job_id, inputs=inputs, num_partitions=n, circuit_id=f"{kind}/tiny",
                                scale="tiny", priority=priority, deadline=deadline))
    return made


@pytest.mark.django_db
def test_within_a_priority_the_job_with_a_deadline_is_claimed_before_older_ones_without(
        make_writer: Callable[[str], StatusWriter]) -> None:
    for i in range(3):
        job("porep-c2", f"old-{i}")
    urgent = job("porep-c2", "urgent", deadline_in=60)
    job("winning-post", "critical-no-deadline", priority=Priority.CRITICAL)  # priority still comes first
    writer = make_writer("host-a")
    claimed = [Partition.objects.get(pk=c.partition_id).job.job_id for c in writer.claim(12)]
    assert claimed[0] == "critical-no-deadline"
    assert claimed[1:11] == [urgent.job_id] * 10 and claimed[11] == "old-0"


@pytest.mark.django_db
def test_the_pipelines_are_shown_in_the_order_they_are_served() -> None:
    from engine.status.farm import farm_snapshot

    job("porep-c2", "older")
    job("porep-c2", "urgent", deadline_in=60)
    assert [p["job_id"] for p in farm_snapshot()["pipelines"]] == ["urgent", "older"]


@pytest.mark.django_db
def test_a_winning_post_sent_without_a_deadline_gets_the_kinds_default_and_a_porep_none() -> None:
    before = timezone.now()
    winning = job("winning-post", "w")
    assert winning.deadline is not None
    assert timedelta(seconds=24) < winning.deadline - before < timedelta(seconds=26)
    assert job("porep-c2", "p").deadline is None


def test_a_deadline_that_is_not_a_date_is_refused_naming_it() -> None:
    with pytest.raises(SubmissionRefused) as refused:
        deadline_of("next tuesday")
    assert refused.value.field == "deadline"
    tomorrow = f"{timezone.now() + timedelta(days=1):%Y-%m-%dT%H:%M:%S}"
    assert deadline_of(tomorrow) == deadline_of(f"{tomorrow}Z")  # UTC without an offset


@pytest.mark.django_db
def test_a_job_expected_to_finish_after_its_deadline_is_at_risk_then_late_once_it_passes() -> None:
    now = timezone.now()
    for i in range(3):  # the farm's record: porep-c2/tiny takes 30 s
        ProofJob.objects.create(job_id=f"history-{i}", kind="porep-c2", circuit_id="porep-c2/tiny",
                                state=JobState.DONE, started_at=now - timedelta(seconds=100),
                                finished_at=now - timedelta(seconds=70))
    assert expected_seconds(["porep-c2/tiny"]) == {"porep-c2/tiny": 30.0}
    tight = job("porep-c2", "tight", deadline_in=10)
    at = standing(tight, 30.0, timezone.now())
    assert at.at_risk and not at.late and at.slack_s is not None and at.slack_s < -19
    later = standing(tight, 30.0, timezone.now() + timedelta(seconds=11))
    assert later.late and not later.at_risk
    roomy = standing(job("porep-c2", "roomy", deadline_in=600), 30.0, timezone.now())
    assert not roomy.at_risk and roomy.slack_s is not None and roomy.slack_s > 500


@pytest.mark.django_db
def test_the_api_takes_a_deadline_and_reports_the_standing(client: Client) -> None:
    _, raw = issue_token("deadline-client")
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    inputs = demo_inputs("porep-c2")
    passed = (timezone.now() - timedelta(minutes=1)).replace(microsecond=0)  # within the window's grace
    body = {"kind": "porep-c2", "job_id": "with-deadline", "inputs": inputs, "deadline": passed.isoformat()}
    made = api.post("/api/v1/jobs", body, content_type="application/json").json()
    assert made["deadline"].startswith(f"{passed:%Y-%m-%dT%H:%M:%S}") and made["late"] and not made["at_risk"]
    bad = api.post("/api/v1/jobs", {**body, "job_id": "bad-deadline", "deadline": "soon"},
                   content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "deadline"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_busy_engine_finishes_a_deadline_job_sent_last_before_the_queued_ones_sent_before_it(
        start_engine: Callable[..., Any]) -> None:
    for i in range(20):
        job("window-post", f"busy-{i}", priority=Priority.NORMAL)
    start_engine(synthesis=1, workers_per_device=1)
    wait_until(lambda: ProofJob.objects.filter(state=JobState.DONE).exists())
    urgent = job("window-post", "urgent", deadline_in=10, priority=Priority.NORMAL)
    there = timezone.now()  # the urgent job is committed: every claim from now on sees it
    # Still unclaimed now, after the urgent job is there to be claimed before them.
    waiting = set(ProofJob.objects.filter(state=JobState.QUEUED).exclude(pk=urgent.pk).values_list("job_id", flat=True))
    wait_until(lambda: not ProofJob.objects.exclude(state=JobState.DONE).exists(), timeout=120)
    finished = {job_id: at for job_id, at in ProofJob.objects.values_list("job_id", "finished_at") if at is not None}
    claimed = {job_id: at for job_id, at in Partition.objects.values_list("job__job_id", "claimed_at") if at is not None}
    # A claim already under way when the urgent job arrived (not yet committed, so its job
    # still read as queued) chose before the urgent job was there to choose.
    waiting = {other for other in waiting if claimed[other] > there}
    assert len(waiting) >= 5, "the engine was not busy when the urgent job arrived"
    assert all(claimed[urgent.job_id] < claimed[other] for other in waiting)
    # Finishing overlaps only with the partition claimed right after it (two finalizer threads).
    later = sorted(waiting, key=lambda other: claimed[other])[1:]
    assert all(finished[urgent.job_id] < finished[other] for other in later)
