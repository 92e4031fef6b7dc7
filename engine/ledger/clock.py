"""The farm-wide version: one counter (StatusClock) that every write increments.

A write bumps it inside its own transaction, so versions follow commit order across every
host and the web process, and a reader that reads the clock inside its snapshot knows exactly
which writes it saw.
"""

from __future__ import annotations

from django.db.models import F

from engine.models import StatusClock

CLOCK_PK = 1


def ensure_clock() -> None:
    StatusClock.objects.get_or_create(pk=CLOCK_PK, defaults={"value": 0})


def next_version() -> int:
    """Increment the clock; call inside the transaction whose rows the version stamps.

    The UPDATE takes the clock row's lock until commit, so versions follow commit order
    across every host and the web process.
    """
    if StatusClock.objects.filter(pk=CLOCK_PK).update(value=F("value") + 1) == 0:
        StatusClock.objects.get_or_create(pk=CLOCK_PK, defaults={"value": 0})
        StatusClock.objects.filter(pk=CLOCK_PK).update(value=F("value") + 1)
    return int(StatusClock.objects.values_list("value", flat=True).get(pk=CLOCK_PK))


def current_version() -> int:
    return int(StatusClock.objects.filter(pk=CLOCK_PK).values_list("value", flat=True).first() or 0)


