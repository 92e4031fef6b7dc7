"""A database that goes away, in one engine (issue 44, points 2, 3, 6 and 9): every thread rides
out a database error with a bounded back-off and says it is down meanwhile; a thread that dies
of anything else ends the engine; the drain after a restart opens a fresh connection; a
finished proof's write is tried again, not thrown away.

The faults are real where the database can give them (PostgreSQL ends a session on request:
``pg_terminate_backend``) and injected as the error the driver raises where it cannot (SQLite).
The whole farm through six PostgreSQL restarts is tests/farm/test_outage.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import OperationalError, connection
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from engine.api.metrics import RecordsCollector
from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, Partition, ProofJob
from engine.pipeline import claim as claim_stage
from engine.pipeline.host import Engine
from engine.pipeline.supervise import Backoff
from engine.states import JobState, PartitionState
from engine.status.farm import farm_snapshot
from engine.status.host_report import HostFigures
from tests.engine.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
P = PartitionState


def winning_post(job_id: str) -> ProofJob:
    inputs, n = validate_inputs("winning-post", demo_inputs("winning-post"))
    job, _ = submit_job(kind="winning-post", job_id=job_id, inputs=inputs, num_partitions=n,
                        circuit_id="winning-post/tiny", scale="tiny")
    return job


def gone() -> OperationalError:
    """What the driver raises for a server that went away."""
    return OperationalError("server closed the connection unexpectedly")


def end_own_session() -> None:
    """PostgreSQL: end this thread's session from another one, as a restart would."""
    import psycopg

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def heartbeat_at(engine: Engine) -> Any:
    assert engine.host is not None
    return EngineHost.objects.get(pk=engine.host.pk).heartbeat_at


def test_a_database_error_while_loading_a_claim_is_ridden_out_and_the_claim_proved(start_engine, monkeypatch) -> None:
    real = claim_stage.load_item
    failures = {"left": 3}

    def load_item(claim: Any, scale: str) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise gone()
        return real(claim, scale)

    monkeypatch.setattr(claim_stage, "load_item", load_item)
    engine = start_engine()
    job = winning_post("load-fails-three-times")
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified, job.error
    part = Partition.objects.get(job=job)
    assert part.attempt == 1 and part.errors == []  # the claim was kept, never lapsed
    assert failures["left"] == 0 and engine.health.dead is None and engine.health.down() == []
    assert all(t.is_alive() for t in engine.threads if t.name == "dispatch")


def test_the_claim_loop_backs_off_during_an_outage_even_with_its_wake_set(start_engine, monkeypatch) -> None:
    engine = start_engine()
    calls = {"n": 0}

    def claim(self: StatusWriter, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        raise gone()

    monkeypatch.setattr(StatusWriter, "claim", claim)
    engine.signals.wake.set()  # new work announced as the database went away: never cleared by an error
    wait_until(lambda: calls["n"] > 0)
    first = calls["n"]
    time.sleep(2.0)
    # Backing off from 0.1 s doubling to 5 s: a handful of tries in two seconds, not thousands.
    assert calls["n"] - first <= 6, f"{calls['n'] - first} claims tried in 2 s"
    assert [d.thread for d in engine.health.down()] == ["dispatch"]
    assert engine.health.dead is None


def test_a_thread_down_is_named_by_status_and_metrics_while_it_is(start_engine, monkeypatch) -> None:
    engine = start_engine()
    real = StatusWriter.claim
    broken = threading.Event()
    broken.set()

    def claim(self: StatusWriter, *args: Any, **kwargs: Any) -> Any:
        if broken.is_set():  # one row the driver cannot read (issue 44's year 10000): every claim fails
            raise OperationalError("date/time field value out of range")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StatusWriter, "claim", claim)
    name = engine.host.name

    def threads_down() -> list[str]:
        return [t.thread for t in HostFigures.from_json(EngineHost.objects.get(name=name).figures).threads_down]

    wait_until(lambda: threads_down() == ["dispatch"], timeout=15)
    [host] = [h for h in farm_snapshot()["hosts"] if h["name"] == name]
    [down] = host["figures"]["threads_down"]
    assert down["thread"] == "dispatch" and "out of range" in down["error"] and down["since"]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordsCollector())
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode())
               for s in family.samples}
    assert samples[("provingsite_engine_thread_down", (("host", name), ("thread", "dispatch")))] == 1

    broken.clear()  # the row is fixed: the thread is up at its next try, and says so at the next beat
    wait_until(lambda: threads_down() == [], timeout=20)
    assert engine.health.dead is None


def test_a_thread_that_dies_of_a_bug_stops_the_heartbeat_and_ends_the_engine(start_engine, monkeypatch) -> None:
    engine = start_engine()
    wait_until(lambda: heartbeat_at(engine) is not None)

    def sweep(self: Engine) -> None:
        raise RuntimeError("a bug in the sweep")

    monkeypatch.setattr(Engine, "sweep", sweep)
    assert engine.health.death.wait(10)
    assert engine.health.dead == "sweep" and "a bug in the sweep" in engine.health.cause
    time.sleep(3 * engine.config.heartbeat_seconds)  # a beat already under way ends
    last = heartbeat_at(engine)
    time.sleep(4 * engine.config.heartbeat_seconds)
    assert heartbeat_at(engine) == last  # the leases lapse: other hosts take the work


def test_the_backoff_is_bounded_and_jittered() -> None:
    low, high = Backoff(first=0.1, cap=5.0, rng=lambda: 0.0), Backoff(first=0.1, cap=5.0, rng=lambda: 1.0)
    assert [round(low.next(), 3) for _ in range(4)] == [0.05, 0.1, 0.2, 0.4]
    assert [round(high.next(), 3) for _ in range(4)] == [0.1, 0.2, 0.4, 0.8]
    for _ in range(100):
        assert high.next() <= 5.0
        low.next()
    assert low.next() == 2.5  # half the cap at the least: engines cut off together come back apart


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="ending one session under a live connection is PostgreSQL's (pg_terminate_backend)")
def test_the_drain_after_a_database_restart_hands_back_the_work_and_marks_the_host_stopped(engine_params) -> None:
    from engine.pipeline.host import EngineConfig

    engine = Engine(EngineConfig.from_settings(devices="cpu", scale="tiny", budget="2GiB", synthesis=1,
                                               workers_per_device=1, host_name="drained-after-restart")).start()
    try:
        inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
        job, _ = submit_job(kind="porep-c2", job_id="held-at-the-restart", inputs=inputs, num_partitions=n,
                            circuit_id="porep-c2/tiny", scale="tiny")
        wait_until(lambda: len(engine.inflight) > 0)
        end_own_session()  # this (main) thread's session dies, as in a restart
    finally:
        engine.stop(drain_seconds=0)  # what is held is handed back through a fresh connection
    assert EngineHost.objects.get(name="drained-after-restart").stopped_at is not None
    parts = Partition.objects.filter(job=job)
    assert all(p.state in (P.DONE, P.PENDING) for p in parts), [p.state for p in parts]
    handed = [p for p in parts if p.state == P.PENDING and p.attempt > 0]
    assert handed and all(p.host is None and p.errors[-1].get("handed_back") for p in handed)


def test_a_finished_proof_survives_a_database_blip_in_its_write(start_engine, monkeypatch, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "LEASE_SECONDS": 2.0}
    real = StatusWriter.apply
    blips = {"left": 2}

    def apply(self: StatusWriter, t: Transition) -> int:
        if t.target == P.DONE and blips["left"]:
            blips["left"] -= 1
            if connection.vendor == "postgresql":
                end_own_session()  # the real thing: the write meets a dead session
            else:
                raise gone()
        return real(self, t)

    monkeypatch.setattr(StatusWriter, "apply", apply)
    engine = start_engine()
    job = winning_post("done-through-a-blip")
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified, job.error
    part = Partition.objects.get(job=job)
    # Written by the attempt that proved it: not dropped, not lapsed, not proved again.
    assert blips["left"] == 0 and part.attempt == 1 and part.errors == []
    assert engine.stats.completed == 1
