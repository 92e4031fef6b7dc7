"""Fixtures of the engine tests: hosts, writers and jobs made from the real records."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from engine.ledger.claims import Claim
from engine.ledger.jobs import submit_job
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, ProofJob, Worker
from engine.states import PartitionState


@pytest.fixture
def make_writer() -> Callable[[str], StatusWriter]:
    def make(name: str = "host-a") -> StatusWriter:
        host, _ = EngineHost.objects.get_or_create(name=name)
        return StatusWriter(host)

    return make


@pytest.fixture
def make_job() -> Callable[..., ProofJob]:
    counter = iter(range(10**6))

    def make(kind: str = "porep-c2", partitions: int = 1, priority: int | None = None, job_id: str = "") -> ProofJob:
        job, _ = submit_job(kind=kind, job_id=job_id or f"{kind}-{next(counter)}", inputs={"n": next(counter)},
                            num_partitions=partitions, priority=priority)
        return job

    return make


@pytest.fixture
def engine_params(settings) -> None:
    """Proving keys shared by the engine tests (made lazily by the engine on first use)."""
    from pathlib import Path

    params = Path(__file__).resolve().parents[2] / ".cache" / "engine-test-params"
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PARAMS_DIR": params, "HEARTBEAT_SECONDS": 0.5}


@pytest.fixture
def start_engine(engine_params):
    """Start a real engine (CPU backend, scale tiny); stopped and drained after the test."""
    from engine.pipeline.host import Engine, EngineConfig

    engines: list[Engine] = []

    def start(**overrides):
        config = EngineConfig.from_settings(**{"devices": "cpu", "scale": "tiny", "budget": "2GiB",
                                               "synthesis": 1, "workers_per_device": 2,
                                               "host_name": f"test-host-{len(engines)}", **overrides})
        engine = Engine(config).start()
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        engine.stop(drain_seconds=5)


def wait_until(condition: Callable[[], object], timeout: float = 30.0, poll: float = 0.05) -> None:
    """Block until ``condition()`` holds; a test fails with "timed out" after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll)


def walk(writer, claim: Claim, *states: str) -> None:
    for state in states:
        writer.apply(Transition(claim, state, on_a_worker(writer, claim) if state == PartitionState.GPU else {}))


def on_a_worker(writer, claim: Claim) -> dict[str, Worker]:
    """A partition goes onto the GPU with a worker of its own (the database insists)."""
    worker, _ = Worker.objects.get_or_create(host=writer.host, device="cpu", ordinal=claim.partition_id)
    return {"worker": worker}
