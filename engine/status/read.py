"""One database snapshot per read of the farm.

Every reader of the records (``/status``, ``/metrics``, the console's page and stream passes,
the job page, the API's job reads) runs its whole read inside ``one_snapshot()``, and reads the
status clock inside it too, so the version it reports names exactly what it read. There is no
retry-until-stable loop anywhere: a snapshot cannot move under its reader.

- PostgreSQL: ``REPEATABLE READ READ ONLY``: the snapshot is taken at the first statement.
- SQLite (WAL): a ``BEGIN DEFERRED`` read transaction; the snapshot is taken at its first
  SELECT and holds until COMMIT. Django's ``atomic()`` would ``BEGIN IMMEDIATE`` here (see
  settings) and take the write lock from the engine, so the transaction is opened by hand;
  it writes nothing and only commits.
- Inside a caller's transaction (a test, a writer reading back its own rows) the reads simply
  join it: that caller already sees one consistent view of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction


@contextmanager
def one_snapshot(using: str = "default") -> Iterator[None]:
    """Run the enclosed reads in one read-only snapshot of the database."""
    connection = connections[using]
    connection.ensure_connection()
    if connection.in_atomic_block or connection.vendor not in {"sqlite", "postgresql"}:
        yield
        return
    if connection.vendor == "postgresql":
        with transaction.atomic(using=using):
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")

