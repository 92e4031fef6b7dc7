"""Claiming: priority first, then the oldest job, then its lowest partition; every claim
bumps the fencing token and takes a lease."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState, Priority

pytestmark = pytest.mark.django_db


def claimed(writer, n: int) -> list[tuple[str, int]]:
    out = []
    for c in writer.claim(n):
        p = Partition.objects.select_related("job").get(pk=c.partition_id)
        out.append((p.job.job_id, p.index))
    return out


def test_work_is_claimed_by_priority_then_age_then_index(make_writer, make_job) -> None:
    writer = make_writer()
    make_job("porep-c2", partitions=2, job_id="old-normal")
    make_job("porep-c2", partitions=2, job_id="new-normal")
    make_job("winning-post", partitions=1, job_id="win", priority=Priority.CRITICAL)
    assert claimed(writer, 3) == [("win", 0), ("old-normal", 0), ("old-normal", 1)]
    assert claimed(writer, 5) == [("new-normal", 0), ("new-normal", 1)]


def test_a_claim_bumps_the_attempt_sets_the_host_and_a_lease(make_writer, make_job) -> None:
    writer = make_writer("host-a")
    job = make_job()
    [claim] = writer.claim(1)
    row = Partition.objects.get(pk=claim.partition_id)
    assert row.host is not None and row.lease_expires_at is not None
    assert (row.attempt, row.host.name, claim.attempt) == (1, "host-a", 1)
    assert row.lease_expires_at > timezone.now()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.started_at is not None


def test_a_claimed_partition_is_reserving_never_pending(make_writer, make_job) -> None:
    writer = make_writer("host-a")
    make_job()
    [claim] = writer.claim(1)
    assert Partition.objects.get(pk=claim.partition_id).state == PartitionState.RESERVING
    with pytest.raises(IntegrityError):  # the database itself keeps "pending" meaning unclaimed
        with transaction.atomic():
            Partition.objects.filter(pk=claim.partition_id).update(state=PartitionState.PENDING)


def test_claimed_work_is_not_claimed_again(make_writer, make_job) -> None:
    a, b = make_writer("host-a"), make_writer("host-b")
    make_job(partitions=1)
    assert len(a.claim(1)) == 1
    assert b.claim(1) == []


def test_work_of_a_cancelled_job_is_not_claimed(make_writer, make_job) -> None:
    writer = make_writer()
    job = make_job()
    ProofJob.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    assert writer.claim(1) == []
