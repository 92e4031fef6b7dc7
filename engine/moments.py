"""The moments a job's record holds: the window a deadline is taken in, and the bounds no stored
moment leaves, so that no row can hold a time its reader cannot read.

A deadline is taken at submission (engine.ledger.submission) only within a window: at most
DEADLINE_GRACE in the past (a client's clock may run a little behind the farm's) and at most
DEADLINE_HORIZON ahead, whatever offset it was written with; it is kept in UTC. The database
holds every deadline and latest start within the far wider STORED_EARLIEST..STORED_LATEST
(CHECK constraints, migration 0021_deadline_bounds), whichever path writes the row, so an
offset that pushes a time past the year 9999 (PostgreSQL stores it; Python cannot read it back)
is refused by the database itself.

On PostgreSQL a timestamp Python cannot read would fail every query that selects its row: the
farm's reads, every engine's claim. ``forgive_unreadable_times`` (installed for every connection
by engine.apps) reads such a value as the nearest stored bound and logs it, so one row never
fails a read of the farm; the constraints keep new ones from being written.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

log = logging.getLogger("engine.records")

DEADLINE_GRACE = timedelta(minutes=5)
DEADLINE_HORIZON = timedelta(days=366)
# Far outside any deadline the window lets in, and far inside what Python reads: arithmetic on
# a stored moment (less an expected duration, plus an offset shown in another zone) stays in range.
STORED_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
STORED_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def window_text() -> str:
    days = DEADLINE_HORIZON.days
    return f"at most {int(DEADLINE_GRACE.total_seconds() // 60)} minutes in the past and at most {days} days ahead"


def read_out_of_range(text: str) -> datetime:
    """The moment a timestamp Python cannot read (before year 1, after 9999) is read as."""
    later = not text.rstrip().endswith("BC") and len(text.split("-", 1)[0].strip()) > 4
    moment = STORED_LATEST if later else STORED_EARLIEST
    log.warning("a stored timestamp Python cannot read (%s) was read as %s; a row holding it was written "
                "before the database refused such values", text, moment.isoformat())
    return moment


def forgive_unreadable_times(sender: Any, connection: Any, **kwargs: Any) -> None:
    """connection_created: on PostgreSQL, read a timestamptz outside Python's years as the nearest
    stored bound instead of failing the query. The loader it wraps is Django's own (it carries
    the connection's time zone, which Django checks each cursor against)."""
    if connection.vendor != "postgresql":
        return
    import psycopg
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    adapters = connection.connection.adapters
    oid = adapters.types["timestamptz"].oid
    django_loader: type[Loader] = adapters.get_loader(oid, Format.TEXT)
    if getattr(django_loader, "forgiving", False):
        return

    class Forgiving(django_loader):  # type: ignore[valid-type,misc]  # a class made at run time
        forgiving = True

        def load(self, data: Any) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError:
                return read_out_of_range(bytes(data).decode("ascii", "replace"))

    adapters.register_loader("timestamptz", Forgiving)


__all__ = ["DEADLINE_GRACE", "DEADLINE_HORIZON", "STORED_EARLIEST", "STORED_LATEST", "forgive_unreadable_times",
           "read_out_of_range", "window_text"]
