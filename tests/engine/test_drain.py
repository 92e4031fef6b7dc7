"""An operator's drain: a drained host claims nothing new; resumed, it proves again."""

from __future__ import annotations

from datetime import datetime

import pytest

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import set_draining, submit_job
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.engine.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def winning_post(job_id: str) -> ProofJob:
    """A real job the engine can prove (one partition, scale tiny)."""
    inputs, n = validate_inputs("winning-post", demo_inputs("winning-post"))
    job, _ = submit_job(kind="winning-post", job_id=job_id, inputs=inputs, num_partitions=n,
                        circuit_id="winning-post/tiny", scale="tiny")
    return job


def beats(host: EngineHost, n: int) -> None:
    """Wait for ``n`` more heartbeats of the host: it is alive, and has re-read its row."""
    for _ in range(n):
        last = EngineHost.objects.get(pk=host.pk).heartbeat_at

        def beaten(last: datetime | None = last) -> bool:
            return EngineHost.objects.get(pk=host.pk).heartbeat_at != last

        wait_until(beaten)


def test_a_drained_host_claims_nothing_and_proves_again_when_resumed(start_engine) -> None:
    # Drained before its engine starts: the flag is the operator's and outlives a restart.
    host = EngineHost.objects.create(name="test-host-0", draining=True)
    job = winning_post("drained-before-start")
    engine = start_engine()
    assert engine.signals.draining.is_set()
    beats(host, 3)
    part = Partition.objects.get(job=job)
    assert part.state == PartitionState.PENDING and part.host is None and part.attempt == 0
    assert ProofJob.objects.get(pk=job.pk).state == JobState.QUEUED

    assert set_draining(host, False)
    wait_until(lambda: not engine.signals.draining.is_set())  # read at the next heartbeat
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified, job.error


def test_draining_a_running_host_stops_its_claims_at_the_next_heartbeat(start_engine) -> None:
    engine = start_engine()
    assert engine.host is not None and not engine.signals.draining.is_set()
    assert set_draining(engine.host, True)
    wait_until(engine.signals.draining.is_set)
    job = winning_post("submitted-while-drained")
    beats(engine.host, 3)
    assert Partition.objects.get(job=job).host is None
    assert not set_draining(engine.host, True)  # already draining: nothing to do, no version spent
