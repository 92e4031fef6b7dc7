"""Every writer gets a clock of its own on a fresh database, whichever writes first: a web
write before any engine's (a job submitted before the first engine starts) once left
PostgreSQL's key sequence behind the web clock's fixed key, and the first engine then could not
register. Making that right by resetting the sequence then raced with a second engine registering
at the same moment: the reset handed out its uncommitted key again."""

from __future__ import annotations

import pytest
from django.core.management.color import no_style
from django.db import connection, transaction

from engine.ledger.clock import WEB_CLOCK, host_clock, next_stamp
from engine.models import StatusClock
from tests.engine.sessions import another_session_holding, commits_within

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh_clocks() -> None:
    """No clock rows, and the key sequence back at its start, as a new database has them."""
    with connection.cursor() as cursor:
        for sql in connection.ops.sql_flush(no_style(), [StatusClock._meta.db_table], reset_sequences=True):
            cursor.execute(sql)


def test_engines_registering_after_a_web_write_get_clocks_of_their_own(fresh_clocks: None) -> None:
    with transaction.atomic():
        assert next_stamp().clock == WEB_CLOCK  # the web writes first
    first, second = host_clock("gpu-a"), host_clock("gpu-b")
    assert len({WEB_CLOCK, first, second}) == 3
    assert host_clock("gpu-a") == first  # found again, not made again
    with transaction.atomic():
        assert [next_stamp(c).version for c in (first, second)] == [1, 1]
        assert next_stamp().version == 2  # the web's own count, untouched by the engines'


def test_an_engine_registering_first_leaves_the_web_its_own_clock(fresh_clocks: None) -> None:
    engine = host_clock("gpu-a")
    assert engine != WEB_CLOCK
    with transaction.atomic():
        assert next_stamp().version == 1 and next_stamp(engine).version == 1


def test_an_engine_registers_while_another_engines_registration_is_still_open(fresh_clocks: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: engines cannot register at the same moment there")
    with transaction.atomic():
        next_stamp()  # the web writes first
    first = host_clock("gpu-a")
    with another_session_holding("INSERT INTO engine_statusclock (source, value) VALUES ('host:gpu-b', 0)"):
        assert commits_within(10, lambda: host_clock("gpu-c")), "gpu-c waited on gpu-b's uncommitted key"
    assert len({WEB_CLOCK, first, host_clock("gpu-c")}) == 3
