"""New work wakes the engines when it commits: in the same process by a callback, across
processes on PostgreSQL by a NOTIFY each engine listens for."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, transaction

from engine.ledger.jobs import cancel_job, retry_job
from engine.ledger.new_work import KEY_CHANNEL, listen, listen_for_new_work, on_key_requests, on_new_work
from engine.models import ProofJob

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def woken() -> Iterator[threading.Event]:
    event = threading.Event()
    forget = on_new_work(event.set)
    yield event
    forget()


def test_a_submission_wakes_the_claim_loop_once_it_commits_not_before(
        woken: threading.Event, make_job: Callable[..., ProofJob]) -> None:
    with transaction.atomic():
        make_job("winning-post")
        assert not woken.is_set()  # an engine woken now would find nothing to claim
    assert woken.is_set()


def test_a_retry_wakes_the_claim_loop(woken: threading.Event, make_job: Callable[..., ProofJob]) -> None:
    job = make_job("winning-post")
    cancel_job(job)
    woken.clear()
    retry_job(job)
    assert woken.is_set()


def test_a_submission_that_rolls_back_wakes_nobody(woken: threading.Event, make_job: Callable[..., ProofJob]) -> None:
    with transaction.atomic():
        make_job("winning-post")
        transaction.set_rollback(True)
    assert not woken.is_set()


def test_an_engine_in_another_process_hears_of_new_work_through_postgresql(make_job: Callable[..., ProofJob]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL's; on SQLite the engines share the process or poll")
    heard, stopping = threading.Event(), threading.Event()
    listener = threading.Thread(target=listen_for_new_work, args=(heard.set, stopping), daemon=True)
    listener.start()
    try:
        for _ in range(50):  # the listener's LISTEN is in place once a NOTIFY reaches it
            make_job("winning-post")
            if heard.wait(0.2):
                break
        assert heard.is_set()
    finally:
        stopping.set()
        listener.join(timeout=5)
    assert not listener.is_alive()


def test_a_key_request_wakes_its_hosts_key_control_once_it_commits_and_no_other_host() -> None:
    from engine.ledger.key_requests import ask
    from engine.models import EngineHost

    asked, other = EngineHost.objects.create(name="asked-host"), EngineHost.objects.create(name="other-host")
    woken: list[int] = []
    forget = on_key_requests(woken.append)
    try:
        with transaction.atomic():
            ask("winning-post/tiny", "evict", "cold", "asked-host")
            assert woken == []  # its engine would find nothing pending yet
    finally:
        forget()
    assert woken == [asked.pk] and other.pk not in woken


def test_an_engine_in_another_process_hears_of_a_key_request_through_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL's; on SQLite the engines share the process or poll")
    from engine.ledger.key_requests import ask
    from engine.models import EngineHost

    host = EngineHost.objects.create(name="listening-host")
    heard: list[str] = []
    got, stopping = threading.Event(), threading.Event()

    def hear(pk: str) -> None:
        heard.append(pk)
        got.set()

    listener = threading.Thread(target=listen, args=({KEY_CHANNEL: hear}, stopping), daemon=True)
    listener.start()
    try:
        for _ in range(50):  # the listener's LISTEN is in place once a NOTIFY reaches it
            ask("winning-post/tiny", "evict", "cold", "listening-host")
            if got.wait(0.2):
                break
        assert heard and set(heard) == {str(host.pk)}
    finally:
        stopping.set()
        listener.join(timeout=5)
