"""Placement by key: with several hosts on one ledger, a partition goes to a host that holds its
proving key while that host is free; a host that would load the key cold takes it once every
holder has been busy for the wait, and never at the cost of a job's priority or deadline. Off,
the first host to ask takes the head of the queue.

Hosts here are real host rows with their own status writers, as runengine makes them; what a
host holds is its ``key_cache`` column as its engine writes it, and it is free when its
dispatcher says so (``mark_free``) while it has room to spare."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from engine.ledger.jobs import submit_job
from engine.ledger.placement import shared_key
from engine.ledger.writer import StatusWriter
from engine.models import EngineHost, Partition, ProofJob
from engine.states import Priority
from tests.engine.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PORE, SNAP, WIN = "porep-c2/tiny", "snap-update/tiny", "winning-post/tiny"
WAIT_S = 1.0


@pytest.fixture(autouse=True)
def placement_on(settings: Any) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PLACEMENT": True, "PLACEMENT_WAIT_S": WAIT_S}


@pytest.fixture
def host(make_writer: Callable[[str], StatusWriter]) -> Callable[..., StatusWriter]:
    """A live host (it heartbeats) holding ``hot`` and ``warm`` keys, free if ``free``."""

    def make(name: str, hot: tuple[str, ...] = (), warm: tuple[str, ...] = (), free: bool = False) -> StatusWriter:
        writer = make_writer(name)
        writer.beat(heartbeat_at=timezone.now())
        keys = [{"circuit_id": c, "bytes": 1 << 20, "tier": "hot"} for c in hot]
        writer.update_host(key_cache=keys + [{"circuit_id": c, "bytes": 1 << 20, "tier": "warm"} for c in warm])
        if free:
            writer.mark_free()
        return writer

    return make


@pytest.fixture
def job() -> Callable[..., ProofJob]:
    """A built-in job of ``circuit`` (kind/scale), its kind's priority unless given."""
    counter = iter(range(10**6))

    def make(circuit: str, partitions: int = 1, priority: int | None = Priority.NORMAL,
             latest_start_in: float | None = None) -> ProofJob:
        n = next(counter)
        latest = None if latest_start_in is None else timezone.now() + timedelta(seconds=latest_start_in)
        created, _ = submit_job(kind=circuit.split("/")[0], job_id=f"{circuit}-{n}", inputs={"n": n},
                                num_partitions=partitions, circuit_id=circuit, scale="tiny", priority=priority,
                                deadline=latest, latest_start_at=latest)
        return created

    return make


def taken(writer: StatusWriter, n: int = 1) -> list[str]:
    """What one claim of ``n`` gave the host: each partition's circuit."""
    return [Partition.objects.select_related("job").get(pk=c.partition_id).job.circuit_id for c in writer.claim(n)]


def test_a_host_takes_the_partitions_of_the_key_it_holds_hot_before_older_work(host, job) -> None:
    b = host("host-b", hot=(SNAP,))
    job(PORE)
    job(SNAP)
    assert taken(b) == [SNAP]


def test_a_host_prefers_a_key_it_holds_hot_to_one_it_holds_warm(host, job) -> None:
    b = host("host-b", hot=(SNAP,), warm=(PORE,))
    job(PORE)
    job(SNAP)
    assert taken(b, 2) == [SNAP, PORE]


def test_a_partition_is_left_to_the_free_host_holding_its_key(host, job) -> None:
    host("host-a", hot=(PORE,), free=True)
    b = host("host-b")
    job(PORE)
    assert taken(b) == []


def test_the_free_holder_gets_it_and_the_other_host_takes_work_nobody_holds(host, job) -> None:
    a = host("host-a", hot=(PORE,), free=True)
    b = host("host-b")
    job(PORE)
    job(SNAP)
    assert taken(b) == [SNAP]
    assert taken(a) == [PORE]


def test_a_host_that_claimed_a_key_s_partition_holds_it_while_loading(host, job) -> None:
    a = host("host-a", free=True)
    b = host("host-b")
    job(PORE, partitions=2)
    assert taken(a) == [PORE]  # nobody held it: cold is the only way
    assert taken(b) == []  # a is loading it, and free


def test_a_host_without_the_key_takes_it_after_the_wait_when_the_holder_is_busy(host, job) -> None:
    host("host-a", hot=(PORE,), free=True)  # and then busy: it asks for nothing more
    b = host("host-b")
    job(PORE)
    assert taken(b) == []
    marked = EngineHost.objects.get(name="host-a").free_at
    assert marked is not None
    wait_until(lambda: timezone.now() > marked + timedelta(seconds=WAIT_S), timeout=5 * WAIT_S)
    assert taken(b) == [PORE]


def test_a_draining_holder_keeps_nothing(host, job) -> None:
    a = host("host-a", hot=(PORE,), free=True)
    a.update_host(draining=True)
    b = host("host-b")
    job(PORE)
    assert taken(b) == [PORE]


def test_a_silent_holder_keeps_nothing(host, job) -> None:
    a = host("host-a", hot=(PORE,), free=True)
    a.beat(heartbeat_at=timezone.now() - timedelta(hours=1))
    b = host("host-b")
    job(PORE)
    assert taken(b) == [PORE]


def test_a_higher_priority_partition_is_taken_before_a_resident_key_s(host, job) -> None:
    host("host-a", hot=(WIN,))  # holds the critical job's key, but is busy
    b = host("host-b", hot=(PORE,))
    job(PORE)
    job(WIN, priority=Priority.CRITICAL)
    assert taken(b) == [WIN]


def test_no_lower_priority_work_is_taken_while_a_higher_one_waits_for_its_holder(host, job) -> None:
    host("host-a", hot=(WIN,), free=True)
    b = host("host-b", hot=(PORE,))
    job(PORE)
    job(WIN, priority=Priority.CRITICAL)
    assert taken(b) == []


def test_a_partition_at_risk_of_its_deadline_is_taken_wherever_its_key_is(host, job) -> None:
    host("host-a", hot=(PORE,), free=True)
    b = host("host-b", hot=(SNAP,))
    job(SNAP)
    job(PORE, latest_start_in=WAIT_S / 2)  # leaving it for a could start it past its latest start
    assert taken(b) == [PORE]


def test_with_placement_off_the_first_host_to_ask_takes_the_head_of_the_queue(host, job, settings: Any) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PLACEMENT": False}
    host("host-a", hot=(PORE,), free=True)
    b = host("host-b", hot=(SNAP,))
    job(PORE)
    job(SNAP)
    assert taken(b) == [PORE]


def test_an_uploaded_zkey_is_no_host_s_key_and_a_registered_circuit_s_is_shared() -> None:
    assert shared_key("custom", "custom/0123456789abcdef") == ""
    assert shared_key("custom", "circom/" + "ab" * 32) == "circom/" + "ab" * 32
    assert shared_key("porep-c2", PORE) == PORE


@pytest.fixture
def own_connection() -> Iterator[Callable[[Callable[[], Any]], threading.Thread]]:
    threads: list[threading.Thread] = []

    def run(body: Callable[[], Any]) -> threading.Thread:
        def target() -> None:
            try:
                body()
            finally:
                connection.close()

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        threads.append(thread)
        return thread

    yield run
    for thread in threads:
        thread.join(timeout=30)


def test_two_hosts_claiming_at_once_each_take_their_own_key_s_partitions(host, job, own_connection) -> None:
    """On PostgreSQL the two claim loops run at the same time (SKIP LOCKED); on SQLite they take turns."""
    hosts = {"host-a": host("host-a", hot=(PORE,), free=True), "host-b": host("host-b", hot=(SNAP,), free=True)}
    job(PORE, partitions=10)
    job(SNAP, partitions=16)
    got: dict[str, list[str]] = {name: [] for name in hosts}

    def claim_until_dry(name: str) -> None:
        writer = hosts[name]
        while circuits := taken(writer):
            got[name] += circuits
            writer.mark_free()

    for name in hosts:
        own_connection(lambda name=name: claim_until_dry(name))
    wait_until(lambda: not Partition.objects.filter(host__isnull=True).exists(), timeout=60)
    wait_until(lambda: sum(map(len, got.values())) == 26, timeout=10)
    assert (sorted(set(got["host-a"])), sorted(set(got["host-b"]))) == ([PORE], [SNAP])


def test_an_engine_with_room_to_spare_marks_its_host_free(start_engine) -> None:
    engine = start_engine()
    wait_until(lambda: EngineHost.objects.get(pk=engine.host.pk).free_at is not None, timeout=30)


def test_a_resident_key_s_jobs_jump_an_older_job_only_if_they_came_within_the_wait(host, job) -> None:
    b = host("host-b", hot=(SNAP,))
    older = job(PORE)
    ProofJob.objects.filter(pk=older.pk).update(submitted_at=timezone.now() - timedelta(seconds=2 * WAIT_S))
    job(SNAP)
    assert taken(b) == [PORE]
