"""Cancel and retry against a running engine take effect within a second."""

from __future__ import annotations

import time

import pytest

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import cancel_job, retry_job, submit_job
from engine.models import Partition, ProofJob
from engine.states import PARTITION_LIVE, JobState, PartitionState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
P = PartitionState


def wait_for(predicate, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.02)
    return time.monotonic() - started


def snap_job(job_id: str) -> ProofJob:
    inputs, n = validate_inputs("snap-update", demo_inputs("snap-update"))
    job, _ = submit_job(kind="snap-update", job_id=job_id, inputs=inputs, num_partitions=n,
                        circuit_id="snap-update/tiny", scale="tiny")
    return job


def holds_memory_for(engine, job: ProofJob) -> bool:
    return any(job.job_id in owner for owner in engine.memory.snapshot()["by_owner"])


def test_cancel_and_retry_take_effect_within_a_second(start_engine) -> None:
    job = snap_job("cancel-me")
    engine = start_engine(synthesis=1, workers_per_device=1)
    wait_for(lambda: Partition.objects.filter(job=job, state=P.DONE).exists(), 60, "a first partition done")

    cancel_job(job)
    released = wait_for(lambda: not holds_memory_for(engine, job), 1.0, "the job's memory to be released")
    assert not Partition.objects.filter(job=job, state__in=PARTITION_LIVE).exists()
    done_at_cancel = Partition.objects.filter(job=job, state=P.DONE).count()
    wait_for(lambda: not engine.inflight, 1.0 - released, "the engine to drop the job's work")
    assert Partition.objects.filter(job=job, state=P.DONE).count() == done_at_cancel  # nothing proved after

    retry_job(job)
    wait_for(lambda: Partition.objects.filter(job=job, state__in=PARTITION_LIVE).exists(), 1.0,
             "the retried job to be picked up")
    assert engine.run_until_idle(timeout=90)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.proof is not None and len(job.proof) == 16
