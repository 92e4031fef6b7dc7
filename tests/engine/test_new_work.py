"""New work wakes the engines when it commits: in the same process by a callback, across
processes on PostgreSQL by a NOTIFY each engine listens for."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, transaction

from engine.ledger.jobs import cancel_job, retry_job
from engine.ledger.new_work import listen_for_new_work, on_new_work
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
