"""The records: a job id is unique in the database, and submission is idempotent on it."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from engine.ledger.jobs import JobConflict, submit_job
from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState, Priority, ProofKind

pytestmark = pytest.mark.django_db


def test_the_database_refuses_two_jobs_with_one_id() -> None:
    ProofJob.objects.create(job_id="snap-1", kind=ProofKind.SNAP_UPDATE)
    with pytest.raises(IntegrityError), transaction.atomic():
        ProofJob.objects.create(job_id="snap-1", kind=ProofKind.POREP_C2)


def test_a_submitted_job_is_queued_with_one_pending_partition_per_index() -> None:
    job, created = submit_job(kind=ProofKind.SNAP_UPDATE, job_id="snap-2", inputs={"a": 1}, num_partitions=16)
    assert created
    assert job.state == JobState.QUEUED
    assert job.priority == Priority.NORMAL
    assert list(job.partitions.values_list("index", flat=True)) == list(range(16))
    assert set(Partition.objects.filter(job=job).values_list("state", flat=True)) == {PartitionState.PENDING}


def test_winning_post_defaults_to_critical_priority() -> None:
    job, _ = submit_job(kind=ProofKind.WINNING_POST, job_id="win-1", inputs={}, num_partitions=1)
    assert job.priority == Priority.CRITICAL


def test_the_same_request_twice_returns_the_first_job() -> None:
    first, _ = submit_job(kind=ProofKind.POREP_C2, job_id="porep-1", inputs={"x": 1}, num_partitions=10)
    again, created = submit_job(kind=ProofKind.POREP_C2, job_id="porep-1", inputs={"x": 1}, num_partitions=10)
    assert not created
    assert again.pk == first.pk
    assert ProofJob.objects.filter(job_id="porep-1").count() == 1


def test_a_different_request_under_a_used_id_is_a_conflict() -> None:
    submit_job(kind=ProofKind.POREP_C2, job_id="porep-2", inputs={"x": 1}, num_partitions=10)
    with pytest.raises(JobConflict, match="porep-2"):
        submit_job(kind=ProofKind.POREP_C2, job_id="porep-2", inputs={"x": 2}, num_partitions=10)
    assert Partition.objects.filter(job__job_id="porep-2").count() == 10
