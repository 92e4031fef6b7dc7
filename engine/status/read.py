"""One database snapshot per read of the farm.

Every reader of the records (``/status``, ``/metrics``, the console's page and stream passes,
the job page, the API's job reads) runs its whole read inside ``one_snapshot()``, and reads the
status clocks inside it too, so the version it reports names exactly what it read. There is no
retry-until-stable loop anywhere: a snapshot cannot move under its reader.

- PostgreSQL: ``REPEATABLE READ READ ONLY``: the snapshot is taken at the first statement.
- SQLite (WAL): a ``BEGIN DEFERRED`` read transaction; the snapshot is taken at its first
  SELECT and holds until COMMIT. Django's ``atomic()`` would ``BEGIN IMMEDIATE`` here (see
  settings) and take the write lock from the engine, so the transaction is opened by hand;
  it writes nothing and only commits.
- Inside a caller's transaction (a test, a writer reading back its own rows) the reads simply
  join it. That is one snapshot too on SQLite and under PostgreSQL's REPEATABLE READ or
  SERIALIZABLE; under READ COMMITTED each statement sees its own, so ``Snapshot.exact`` is
  false there and a reader says so (``/status``'s ``consistent``).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connections, transaction


@dataclass(frozen=True)
class Snapshot:
    """What a read ran in: ``exact`` when every statement saw the same committed state."""

    exact: bool


def _joined(connection) -> Snapshot:
    if connection.vendor == "sqlite":
        return Snapshot(exact=True)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW transaction_isolation")
            (level,) = cursor.fetchone()
        return Snapshot(exact=level in {"repeatable read", "serializable"})
    return Snapshot(exact=False)


def _sqlite_in_transaction(connection) -> bool:
    # Our own BEGIN DEFERRED is invisible to Django's atomic bookkeeping; sqlite3 knows.
    return connection.vendor == "sqlite" and bool(connection.connection.in_transaction)


# Within one of its own snapshots a reader may keep what a query returned and answer the same
# query again from it (the console's panels read the hosts five times a pass): the snapshot
# cannot move, so the answer cannot either. A snapshot joined from a caller's transaction
# keeps nothing, as the caller may write between two reads.
_MEMO_ATTR = "provingsite_snapshot_memo"


def snapshot_memo(connection) -> dict[object, object] | None:
    """The current own snapshot's memo on this connection, or None outside one."""
    return getattr(connection, _MEMO_ATTR, None)


@contextmanager
def _remembering(connection) -> Iterator[None]:
    setattr(connection, _MEMO_ATTR, {})
    try:
        yield
    finally:
        setattr(connection, _MEMO_ATTR, None)


@contextmanager
def one_snapshot(using: str = "default") -> Iterator[Snapshot]:
    """Run the enclosed reads in one read-only snapshot of the database."""
    connection = connections[using]
    connection.ensure_connection()
    if connection.in_atomic_block or _sqlite_in_transaction(connection):
        yield _joined(connection)
        return
    if connection.vendor == "postgresql":
        with transaction.atomic(using=using):
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            with _remembering(connection):
                yield Snapshot(exact=True)
        return
    if connection.vendor != "sqlite":
        yield Snapshot(exact=False)
        return
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        with _remembering(connection):
            yield Snapshot(exact=True)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")


# ---- the collector waits for a pass ------------------------------------------------------

# A pass over a busy farm makes tens of thousands of short-lived objects (rows, dicts, units)
# that all die when it returns. Left to run, the cyclic collector finds them alive mid-pass,
# promotes them to older generations, and every few passes runs a full collection over the
# whole process heap inside one: profiled on the bench's farm (bench/status.py), that was the
# slowest percent of /status and console passes (a render pass: 148 ms at worst, 34 ms with
# the collector waiting). Deferred to the end of the pass, the collector finds those objects
# already freed by their reference counts. Passes that overlap share one deferral; should
# they overlap for longer than MAX_DEFERRAL_S the pass that notices collects at once, so
# cyclic garbage never waits long.
MAX_DEFERRAL_S = 2.0

_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False
_gc_since = 0.0


@contextmanager
def collection_deferred() -> Iterator[None]:
    """Hold the cyclic garbage collector off for the enclosed pass (see above)."""
    global _gc_holders, _gc_was_enabled, _gc_since
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled, _gc_since = gc.isenabled(), time.monotonic()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        overdue = False
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0:
                if _gc_was_enabled:
                    gc.enable()
            elif _gc_was_enabled and time.monotonic() - _gc_since > MAX_DEFERRAL_S:
                overdue, _gc_since = True, time.monotonic()
        if overdue:
            gc.collect()
