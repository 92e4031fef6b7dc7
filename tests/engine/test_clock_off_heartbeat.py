"""A heartbeat is liveness, not a transition: it takes no version, so the status clock (the one
row every transition locks) is not every host's heartbeat lock, and a farm with nothing to
rescue does not lock it to find that out."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from engine.ledger.clock import current_version, ensure_clock
from engine.ledger.writer import StatusWriter
from engine.models import EngineHost

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_heartbeat_records_liveness_without_a_version(make_writer: Callable[[str], StatusWriter]) -> None:
    writer = make_writer("host-a")
    before, beat_at = current_version(), timezone.now()
    writer.beat(heartbeat_at=beat_at, devices=[])
    assert EngineHost.objects.get(name="host-a").heartbeat_at == beat_at
    assert writer.requeue_lapsed() == 0
    assert current_version() == before


def test_heartbeats_go_on_while_another_session_holds_the_status_clock(
        make_writer: Callable[[str], StatusWriter]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time whatever the rows; the clock's lock is PostgreSQL's question")
    writer = make_writer("host-a")
    ensure_clock()
    holder = psycopg.connect(**connection.get_connection_params())
    try:
        holder.execute("UPDATE engine_statusclock SET value = value + 1")  # held until rollback
        done = threading.Event()

        def heartbeat() -> None:
            writer.beat(heartbeat_at=timezone.now(), devices=[])
            writer.requeue_lapsed()
            connection.close()
            done.set()

        threading.Thread(target=heartbeat, daemon=True).start()
        assert done.wait(10), "the heartbeat waited for the status clock's lock"
    finally:
        holder.rollback()
        holder.close()
