"""New work wakes the engines at once: a job submitted or retried, or a partition handed back,
tells every engine's claim loop when its transaction commits.

In one process (the embedded default) that is a callback; across processes on PostgreSQL, a
NOTIFY on CHANNEL, sent inside the transaction and so delivered only at its commit, which each
engine LISTENs for on a connection of its own. The claim loop still polls as the fallback (a
web server and an engine in separate processes on SQLite), so a lost wake costs one poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connection, transaction

CHANNEL = "provingsite_new_work"
log = logging.getLogger("engine.ledger")

_listeners: list[Callable[[], None]] = []
_lock = threading.Lock()


def on_new_work(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` whenever work in this process becomes claimable; returns the undo."""
    with _lock:
        _listeners.append(callback)

    def remove() -> None:
        with _lock:
            if callback in _listeners:
                _listeners.remove(callback)

    return remove


def announce_new_work() -> None:
    """Inside the transaction that makes work claimable: wake every engine once it commits."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])
    transaction.on_commit(_wake_here)


def _wake_here() -> None:
    with _lock:
        listeners = list(_listeners)
    for callback in listeners:
        callback()


def listen_for_new_work(wake: Callable[[], None], stopping: threading.Event) -> None:
    """On PostgreSQL, call ``wake`` for every NOTIFY another process sends, until ``stopping``;
    returns at once on other databases (their engines share the process or poll)."""
    if connection.vendor != "postgresql":
        return
    import psycopg

    params = connection.get_connection_params()
    while not stopping.is_set():
        try:
            with psycopg.connect(**params, autocommit=True) as listener:
                listener.execute(f"LISTEN {CHANNEL}")
                while not stopping.is_set():
                    for _ in listener.notifies(timeout=0.5):  # half a second at most, then see stopping
                        wake()
        except psycopg.Error as exc:  # the database went away: listen again shortly, polling meanwhile
            log.warning("listening for new work failed: %s", exc)
            stopping.wait(1.0)
