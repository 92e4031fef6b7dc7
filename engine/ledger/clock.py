"""Status clocks: one per writer, so that writers never wait for each other to stamp a change.

Each engine host has a clock row of its own, and the web process (submissions, cancels, drains)
one more (``WEB_CLOCK``). A write takes its writer's next value inside its own transaction and
stamps every row it writes with the pair (clock, version). One writer's writes are serialised
already (a host's StatusWriter holds its lock through the commit; web writes queue on the web
clock row's lock), so one clock's values follow its commits. Two writers share no row, so on
PostgreSQL their transactions commit side by side; one farm-wide counter made every write of
every host queue on one row's lock until it committed.

A reader reads every clock inside its snapshot (``engine.status.records.clocks``). The readings name exactly the
commits it sees: of each clock, the values up to what it read. Their sum, the farm's version,
grows with every commit, and two snapshots with the same sum saw the same commits (a later
snapshot's reading is at least the earlier one's on every clock). What a reader has not seen
is what any clock stamped after its reading (``written_after``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q

from engine.models import WEB_CLOCK, StatusClock


@dataclass(frozen=True)
class Stamp:
    """What one write is stamped with: its writer's clock and that clock's new value. The row's
    own ``revision`` counts up with each stamp, so a sum of revisions grows with any change to
    the rows summed (the API's ETags), which versions of several clocks cannot promise."""

    clock: int
    version: int

    def fields(self) -> dict[str, Any]:
        """For a queryset ``update(**stamp.fields())``."""
        return {"clock": self.clock, "version": self.version, "revision": F("revision") + 1}

    def put(self, row: Any) -> None:
        """On a row read under its lock (select_for_update), before it is saved."""
        row.clock, row.version, row.revision = self.clock, self.version, row.revision + 1


@dataclass(frozen=True)
class Reading:
    """Every clock's value as one snapshot saw it."""

    values: Mapping[int, int]

    @property
    def version(self) -> int:
        """The farm's version: the number of commits the snapshot saw."""
        return sum(self.values.values())


def clock_for(source: str) -> int:
    """The clock of ``source`` (``host:<name>``, or ``web``), created on first use."""
    if source == "web":
        ensure_clock()
        return WEB_CLOCK
    found = StatusClock.objects.filter(source=source).values_list("pk", flat=True).first()
    if found is not None:
        return found
    ensure_clock()
    # The web's row has its fixed key, which PostgreSQL's key sequence does not count, so on a
    # database whose web wrote first the sequence's first value collides with it. That failed
    # insert used the value up and the second try draws the next. Resetting the sequence to the
    # table's largest key instead raced with another engine registering at the same moment (its
    # key not yet committed, the reset handed it out again).
    try:
        return _made(source)
    except IntegrityError:
        return _made(source)


def _made(source: str) -> int:
    with transaction.atomic():
        row, _ = StatusClock.objects.get_or_create(source=source)
    return row.pk


def host_clock(name: str) -> int:
    return clock_for(f"host:{name}")


def ensure_clock() -> None:
    StatusClock.objects.get_or_create(pk=WEB_CLOCK, defaults={"source": "web", "value": 0})


def next_stamp(clock: int = WEB_CLOCK) -> Stamp:
    """Advance ``clock``; call inside the transaction whose rows the stamp marks.

    The UPDATE holds the clock row's lock until commit, so that clock's values follow its
    commits; only writers of the same clock wait for it.
    """
    value = _advance(clock)
    if value is None:
        if clock != WEB_CLOCK:
            raise LookupError(f"status clock {clock} does not exist (clock_for creates it)")
        ensure_clock()  # the web's clock is made on its first write, as a fresh database has none
        value = _advance(clock)
        assert value is not None  # made just above, inside this transaction
    return Stamp(clock, value)


def _advance(clock: int) -> int | None:
    """The clock's next value, in one statement (SQLite 3.35+ and PostgreSQL both return the
    updated row); None where the clock has no row. Every write of every writer takes this step:
    the ORM's UPDATE then SELECT compiled two queries each time, a tenth of a tiny partition's
    engine time."""
    q = connection.ops.quote_name
    # The model's own column names: "id" and "value" (names Django gives its fields' columns).
    table, pk, value = q(StatusClock._meta.db_table), q("id"), q("value")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {value} = {value} + 1 WHERE {pk} = %s RETURNING {value}", [clock])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def written_after(reading: Reading) -> Q:
    """Rows (with ``clock`` and ``version`` columns) stamped after ``reading``: by a clock past
    the value read, or by a clock the reading did not know yet."""
    newer = [Q(clock=clock, version__gt=value) for clock, value in reading.values.items()]
    return reduce(or_, newer, ~Q(clock__in=list(reading.values)))
