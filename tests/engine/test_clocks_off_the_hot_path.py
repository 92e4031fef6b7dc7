"""No write waits for an unrelated one on a status clock: a heartbeat is liveness, not a
transition, so it takes no version (and a farm with nothing to rescue does not take one to find
that out); and each host stamps its transitions with its own clock, so one host's open write
does not hold up another's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from engine.ledger import claims as claims_module
from engine.ledger import writer as writer_module
from engine.ledger.claims import Claim
from engine.ledger.clock import ensure_clock
from engine.ledger.deadlocks import DEADLOCK_DETECTED
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState
from engine.status.records import current_version
from tests.engine.conftest import walk
from tests.engine.sessions import another_session_holding, commits_within

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState
ONE_WRITER = "SQLite has one writer at a time whatever the rows: which locks a write waits for is PostgreSQL's question"


def test_a_heartbeat_records_liveness_without_a_version(make_writer: Callable[[str], StatusWriter]) -> None:
    writer = make_writer("host-a")
    before, beat_at = current_version(), timezone.now()
    writer.beat(heartbeat_at=beat_at, devices=[])
    assert EngineHost.objects.get(name="host-a").heartbeat_at == beat_at
    assert writer.requeue_lapsed() == 0
    assert current_version() == before


def test_heartbeats_go_on_while_another_session_holds_the_status_clocks(
        make_writer: Callable[[str], StatusWriter]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(ONE_WRITER)
    writer = make_writer("host-a")
    ensure_clock()

    def heartbeat() -> None:
        writer.beat(heartbeat_at=timezone.now(), devices=[])
        writer.requeue_lapsed()

    with another_session_holding("UPDATE engine_statusclock SET value = value + 1"):
        assert commits_within(10, heartbeat), "the heartbeat waited for a status clock's lock"


def test_one_hosts_open_write_does_not_hold_up_another_hosts_writes(
        make_writer: Callable[[str], StatusWriter], make_job: Callable[..., ProofJob]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(ONE_WRITER)
    slow, other = make_writer("host-a"), make_writer("host-b")
    make_job(partitions=2)
    [_], [claim] = slow.claim(1), other.claim(1)
    # host-a inside a write that has taken its stamp and not yet committed
    with another_session_holding("UPDATE engine_statusclock SET value = value + 1 WHERE id = %s", [slow.clock]):
        assert commits_within(10, lambda: other.apply(Transition(claim, P.SYNTHESIZING))), \
            "host-b's transition waited for host-a's open write"


def test_two_hosts_ending_the_last_partitions_of_one_job_at_once_queue_instead_of_deadlocking(
        make_writer: Callable[[str], StatusWriter], make_job: Callable[..., ProofJob],
        caplog: pytest.LogCaptureFixture) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(ONE_WRITER)
    a, b = make_writer("host-a"), make_writer("host-b")
    job = make_job(partitions=2)
    [ca], [cb] = a.claim(1), b.claim(1)
    finishing = (P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING)
    walk(a, ca, *finishing)
    walk(b, cb, *finishing)
    errors: list[BaseException] = []

    def done(writer: StatusWriter, claim: Claim) -> None:
        try:
            writer.apply(Transition(claim, P.DONE, {"proof": {"pi_a": []}, "public_inputs": []}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=done, args=args) for args in ((a, ca), (b, cb))]
    # Hold the job so that both hosts' last transitions are under way before either settles.
    with another_session_holding("SELECT id FROM engine_proofjob WHERE id = %s FOR UPDATE", [job.pk]):
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # both now wait for the job
    for thread in threads:
        thread.join(20)
    assert not errors, errors
    assert "deadlock" not in caplog.text
    job.refresh_from_db()
    assert job.state == JobState.DONE


def test_a_transition_that_does_not_end_its_partition_never_waits_for_the_jobs_lock(
        make_writer: Callable[[str], StatusWriter], make_job: Callable[..., ProofJob]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(ONE_WRITER)
    writer = make_writer("host-a")
    job = make_job(partitions=1)
    [claim] = writer.claim(1)
    # Another host ending a partition of the job holds the job's lock while it settles.
    with another_session_holding("SELECT id FROM engine_proofjob WHERE id = %s FOR UPDATE", [job.pk]):
        assert commits_within(10, lambda: writer.apply(Transition(claim, P.SYNTHESIZING))), \
            "a reserving → synthesizing write waited for its job's lock"


class Deadlock(Exception):
    sqlstate = DEADLOCK_DETECTED  # what psycopg's DeadlockDetected carries


def test_a_claim_run_again_after_a_deadlock_hands_out_each_partition_once(
        make_writer: Callable[[str], StatusWriter], make_job: Callable[..., ProofJob],
        monkeypatch: pytest.MonkeyPatch) -> None:
    writer = make_writer("host-a")
    make_job(partitions=2)
    real, calls = claims_module.claim_partitions, []

    def deadlocked_once(*args: Any, **kwargs: Any) -> list[Partition]:
        rows = real(*args, **kwargs)
        calls.append(len(rows))
        if len(calls) == 1:  # the server rolls the first try back after it claimed
            raise OperationalError("deadlock detected") from Deadlock()
        return rows

    monkeypatch.setattr(writer_module, "claim_partitions", deadlocked_once)
    claims = writer.claim(2)
    assert calls == [2, 2] and len(claims) == 2 and len({c.partition_id for c in claims}) == 2
    assert Partition.objects.filter(state=P.RESERVING).count() == 2
