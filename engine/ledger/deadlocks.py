"""Writes PostgreSQL rolled back to break a deadlock are run again from the start.

Writers take their own clock and then rows, partitions after their job where they need both;
a lease rescue takes the lapsed partitions before their job, as it cannot know which jobs it
will touch. When such a rescue meets a cancel or an ending partition of the same job, the
server rolls one transaction back (SQLSTATE 40P01) after ``deadlock_timeout``; running it again
is safe, as every write re-reads the rows it changes under their locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import OperationalError

log = logging.getLogger("engine.ledger")

DEADLOCK_DETECTED = "40P01"
TRIES = 3


def retried[T](transaction: Callable[[], T]) -> T:
    """``transaction()`` (which opens and commits its own), again on a deadlock, at most TRIES times."""
    for attempt in range(1, TRIES + 1):
        try:
            return transaction()
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK_DETECTED or attempt == TRIES:
                raise
            log.warning("write rolled back to break a deadlock (try %d of %d): %s", attempt, TRIES,
                        str(exc).splitlines()[0])
    raise AssertionError("unreachable")
