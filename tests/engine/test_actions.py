"""Cancel and retry, as the admin and the API call them."""

from __future__ import annotations

import pytest

from engine.ledger.jobs import cancel_job, retry_job
from engine.ledger.writer import Refused, Transition
from engine.models import WEB_CLOCK, Partition
from engine.states import JobState, PartitionState
from engine.status.records import current_version

pytestmark = pytest.mark.django_db
P = PartitionState


def test_cancel_stops_every_unfinished_partition_and_fences_the_engine(make_writer, make_job) -> None:
    writer = make_writer()
    job = make_job(partitions=3)
    [claim] = writer.claim(1)
    writer.apply(Transition(claim, P.SYNTHESIZING))
    before = current_version()
    cancel_job(job)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and (job.clock, current_version()) == (WEB_CLOCK, before + 1)
    assert set(job.partitions.values_list("state", flat=True)) == {P.CANCELLED}
    with pytest.raises(Refused):
        writer.apply(Transition(claim, P.SYNTH_DONE))


def test_retry_requeues_unfinished_partitions_and_restarts_the_attempt_count(make_writer, make_job) -> None:
    writer = make_writer()
    writer.max_attempts = 1
    job = make_job(partitions=1)
    [claim] = writer.claim(1)
    writer.apply(Transition(claim, P.FAILED, reason="boom", retryable=True))
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    retry_job(job)
    job.refresh_from_db()
    row = Partition.objects.get(pk=claim.partition_id)
    assert job.state == JobState.QUEUED and row.state == P.PENDING and row.host is None
    [again] = writer.claim(1)
    assert again.attempt == claim.attempt + 1  # the fencing token only grows
    writer.apply(Transition(again, P.FAILED, reason="boom again", retryable=True))
    assert Partition.objects.get(pk=claim.partition_id).state == P.FAILED  # one attempt per round


def test_cancel_of_a_finished_job_changes_nothing(make_job) -> None:
    job = make_job()
    job.state = JobState.DONE
    job.save()
    before = current_version()
    cancel_job(job)
    assert current_version() == before
