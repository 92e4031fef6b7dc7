"""New work wakes the engines at once: a job submitted or retried, or a partition handed back,
tells every engine's claim loop when its transaction commits; an operator's key request
(engine.ledger.key_requests) tells its host's key control the same way.

In one process (the embedded default) that is a callback; across processes on PostgreSQL, a
NOTIFY on CHANNEL (KEY_CHANNEL, with the host's pk as payload), sent inside the transaction
and so delivered only at its commit, which each engine LISTENs for on a connection of its own.
The claim loop and the key control still poll as the fallback (a web server and an engine in
separate processes on SQLite), so a lost wake costs one poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from django.db import connection, transaction

CHANNEL = "provingsite_new_work"
KEY_CHANNEL = "provingsite_key_requests"
log = logging.getLogger("engine.ledger")

_listeners: list[Callable[[], None]] = []
_key_listeners: list[Callable[[int], None]] = []
_lock = threading.Lock()


def _register[F](listeners: list[F], callback: F) -> Callable[[], None]:
    """Add ``callback`` to ``listeners``; returns the undo."""
    with _lock:
        listeners.append(callback)

    def remove() -> None:
        with _lock:
            if callback in listeners:
                listeners.remove(callback)

    return remove


def on_new_work(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` whenever work in this process becomes claimable; returns the undo."""
    return _register(_listeners, callback)


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


def on_key_requests(callback: Callable[[int], None]) -> Callable[[], None]:
    """Call ``callback(host_pk)`` whenever key requests for that host commit in this process;
    returns the undo."""
    return _register(_key_listeners, callback)


def announce_key_requests(host_pks: Iterable[int]) -> None:
    """Inside the transaction that writes key requests: wake those hosts' key control once it
    commits (a request is then carried out at once, not at the host's next heartbeat)."""
    pks = sorted(set(host_pks))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for pk in pks:
                cursor.execute("SELECT pg_notify(%s, %s)", [KEY_CHANNEL, str(pk)])

    def wake() -> None:
        with _lock:
            listeners = list(_key_listeners)
        for pk in pks:
            for callback in listeners:
                callback(pk)

    transaction.on_commit(wake)


def listen_for_new_work(wake: Callable[[], None], stopping: threading.Event) -> None:
    """On PostgreSQL, call ``wake`` for every NOTIFY of new work another process sends, until
    ``stopping``; returns at once on other databases (their engines share the process or poll)."""
    listen({CHANNEL: lambda _: wake()}, stopping)


def listen(handlers: Mapping[str, Callable[[str], None]], stopping: threading.Event) -> None:
    """On PostgreSQL, call ``handlers[channel](payload)`` for every NOTIFY on those channels,
    on one connection, until ``stopping``; returns at once on other databases."""
    if connection.vendor != "postgresql" or not handlers:
        return
    import psycopg

    params = connection.get_connection_params()
    while not stopping.is_set():
        try:
            with psycopg.connect(**params, autocommit=True) as listener:
                for channel in handlers:
                    listener.execute(f"LISTEN {channel}")
                while not stopping.is_set():
                    for note in listener.notifies(timeout=0.5):  # half a second at most, then see stopping
                        handler = handlers.get(note.channel)
                        if handler is not None:
                            handler(note.payload)
        except psycopg.Error as exc:  # the database went away: listen again shortly, polling meanwhile
            log.warning("listening for new work failed: %s", exc)
            stopping.wait(1.0)
