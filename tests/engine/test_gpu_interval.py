"""A partition's GPU interval ends whenever it leaves ``gpu``, whichever way: readers that
count a worker busy between ``gpu_started_at`` and ``gpu_finished_at`` never count it busy
after it left (a cancel in ``gpu`` once left the interval open, and the worker 100 % busy on
/history/ for ever after). An attempt that ends and goes back to the queue is kept, closed, in
the partition's ``attempts``; the row's own moments are then the next attempt's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from engine.ledger.jobs import cancel_job
from engine.ledger.writer import Transition
from engine.models import Partition
from engine.states import PartitionState
from tests.engine.conftest import on_a_worker, walk

pytestmark = pytest.mark.django_db
P = PartitionState


def on_the_gpu(writer, make_job):
    job = make_job()
    [claim] = writer.claim(1)
    walk(writer, claim, P.SYNTHESIZING, P.SYNTH_DONE)
    writer.apply(Transition(claim, P.GPU, {**on_a_worker(writer, claim), "gpu_started_at": timezone.now()}))
    return job, claim


def interval(claim) -> tuple:
    row = Partition.objects.get(pk=claim.partition_id)
    return row.gpu_started_at, row.gpu_finished_at


def kept(claim) -> tuple:
    """The GPU interval of the attempt the partition kept when it went back to the queue."""
    row = Partition.objects.get(pk=claim.partition_id)
    assert interval(claim) == (None, None)  # the next attempt's, not begun
    (attempt,) = row.attempts
    assert attempt["attempt"] == claim.attempt
    return attempt["gpu_started_at"], attempt["gpu_finished_at"]


def test_a_cancel_while_on_the_gpu_ends_the_interval(make_writer, make_job) -> None:
    job, claim = on_the_gpu(make_writer(), make_job)
    cancel_job(job)
    started, finished = interval(claim)
    assert finished is not None and finished >= started


def test_a_failure_on_the_gpu_ends_the_interval(make_writer, make_job) -> None:
    writer = make_writer()
    _, claim = on_the_gpu(writer, make_job)
    writer.apply(Transition(claim, P.FAILED, reason="device lost", retryable=True))
    started, finished = kept(claim)
    assert Partition.objects.get(pk=claim.partition_id).state == P.PENDING
    assert finished is not None and finished >= started


def test_a_sibling_on_the_gpu_cancelled_by_its_job_s_failure_ends_the_interval(make_writer, make_job) -> None:
    writer = make_writer()
    make_job(partitions=2)
    first, second = writer.claim(2)
    walk(writer, first, P.SYNTHESIZING, P.SYNTH_DONE)
    writer.apply(Transition(first, P.GPU, {**on_a_worker(writer, first), "gpu_started_at": timezone.now()}))
    writer.apply(Transition(second, P.FAILED, reason="inputs refused", retryable=False))  # the job fails
    started, finished = interval(first)
    assert Partition.objects.get(pk=first.partition_id).state == P.CANCELLED
    assert finished is not None and finished >= started


def test_the_next_attempt_on_the_gpu_starts_an_open_interval(make_writer, make_job) -> None:
    writer = make_writer()
    _, claim = on_the_gpu(writer, make_job)
    writer.apply(Transition(claim, P.FAILED, reason="device lost", retryable=True))
    [again] = writer.claim(1)
    walk(writer, again, P.SYNTHESIZING, P.SYNTH_DONE)
    writer.apply(Transition(again, P.GPU, {**on_a_worker(writer, again), "gpu_started_at": timezone.now()}))
    assert interval(again)[1] is None  # the first attempt's end is not this attempt's


def test_a_lapsed_lease_on_the_gpu_ends_the_interval(make_writer, make_job) -> None:
    writer = make_writer()
    _, claim = on_the_gpu(writer, make_job)
    Partition.objects.filter(pk=claim.partition_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert make_writer("host-b").requeue_lapsed() == 1
    started, finished = kept(claim)
    assert finished is not None and finished >= started


def test_a_hand_back_from_the_gpu_ends_the_interval(make_writer, make_job) -> None:
    writer = make_writer()
    _, claim = on_the_gpu(writer, make_job)
    assert writer.hand_back(claim, "engine stopping")
    started, finished = kept(claim)
    assert finished is not None and finished >= started
