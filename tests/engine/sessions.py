"""Two PostgreSQL sessions at once: one holds a transaction open while the test's write runs on
a thread of its own, so a test can show which locks a write waits for."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence

import psycopg
from django.db import connection


@contextlib.contextmanager
def another_session_holding(sql: str, params: Sequence[object] = ()) -> Iterator[None]:
    """Another session that ran ``sql`` (taking its locks) in a transaction it leaves open."""
    holder = psycopg.connect(**connection.get_connection_params())
    try:
        holder.execute(sql, params)
        yield
    finally:
        holder.rollback()
        holder.close()


def commits_within(seconds: float, write: Callable[[], object]) -> bool:
    """Whether ``write``, on a thread of its own (its own connection), is done in time."""
    done = threading.Event()

    def run() -> None:
        try:
            write()
            done.set()
        finally:
            connection.close()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(seconds)
