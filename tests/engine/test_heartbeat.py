"""Leases: a host that stops renewing loses its work to the queue, attempt counted, and its
late writes are refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from engine.ledger.leases import renew_leases
from engine.ledger.settle import failure_text
from engine.ledger.writer import Refused, Transition
from engine.models import Partition
from engine.states import JobState, PartitionState

pytestmark = pytest.mark.django_db
P = PartitionState


def lapse(partition_id: int) -> None:
    Partition.objects.filter(pk=partition_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def lapsed_in_synthesis(writer):
    """One partition claimed by ``writer``, moved into synthesis, and its lease lapsed."""
    [claim] = writer.claim(1)
    writer.apply(Transition(claim, P.SYNTHESIZING))
    lapse(claim.partition_id)
    return claim


def test_a_lapsed_lease_is_requeued_with_the_attempt_counted(make_writer, make_job) -> None:
    a, b = make_writer("host-a"), make_writer("host-b")
    make_job()
    claim = lapsed_in_synthesis(a)
    assert b.requeue_lapsed() == 1
    row = Partition.objects.get(pk=claim.partition_id)
    assert row.state == P.PENDING and row.host is None
    assert row.errors[-1]["reason"] == "lease lapsed on host host-a during synthesizing" and row.errors[-1]["attempt"] == 1
    [again] = b.claim(1)
    assert again.attempt == 2


def test_the_old_host_cannot_write_after_its_work_was_requeued(make_writer, make_job) -> None:
    a, b = make_writer("host-a"), make_writer("host-b")
    make_job()
    claim = lapsed_in_synthesis(a)
    b.requeue_lapsed()
    b.claim(1)
    with pytest.raises(Refused):
        a.apply(Transition(claim, P.SYNTH_DONE))


def test_lapses_past_max_attempts_fail_the_job_saying_the_reason_once(make_writer, make_job) -> None:
    a = make_writer("host-a")
    a.max_attempts = 2
    job = make_job()
    for _ in range(2):
        [claim] = a.claim(1)
        lapse(claim.partition_id)
        a.requeue_lapsed()
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == "partition 0 failed after 2 attempts: lease lapsed on host host-a during reserving"


def test_a_failure_names_each_other_reason_since_the_last_retry_once() -> None:
    errors: list[dict[str, Any]] = [{"attempt": 1, "reason": "old"}, {"retry": True}, {"attempt": 2, "reason": "out of memory"},
              {"attempt": 3, "reason": "drained", "handed_back": True}, {"attempt": 3, "reason": "bad witness"},
              {"attempt": 4, "reason": "bad witness"}]
    assert failure_text(5, "bad witness", errors) == ("partition 5 failed after 3 attempts: bad witness "
                                                      "(before that, attempt 2: out of memory)")
    assert failure_text(0, "bad witness", [{"attempt": 1, "reason": "bad witness"}]) == "partition 0 failed: bad witness"


def test_renewal_extends_only_the_claims_a_host_holds(make_writer, make_job) -> None:
    a = make_writer("host-a")
    make_job(partitions=2)
    first, second = a.claim(2)
    lapse(first.partition_id)
    lapse(second.partition_id)
    assert renew_leases(a.host.pk, [first]) == 1
    assert a.requeue_lapsed() == 1
    assert Partition.objects.get(pk=first.partition_id).host_id == a.host.pk
