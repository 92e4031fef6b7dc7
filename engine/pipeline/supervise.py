"""Every engine thread supervised: a database error backs off and tries again, anything else
ends the process.

A thread's work is a ``step`` run again and again (one claim, one proof, one beat). A step
that raises a ``DatabaseError`` marks its thread down (``Health``: which thread, since when,
the error), closes the thread's connection and waits a bounded, jittered, growing time
before the next step: an outage is ridden out at a few tries a second at most, never spun
on, and the first step that succeeds marks the thread up again. The heartbeat writes the
threads down with the host's figures, so ``/status`` and ``/metrics`` name them while they
are.

Any other exception is a bug the thread cannot get past: the thread is recorded dead and
``Health.death`` set, which stops the heartbeat (other hosts rescue the work once its leases
lapse) and makes ``runengine`` exit non-zero, for its supervisor (systemd, a container
runtime) to start it again. A process that heartbeats with a dead claim thread looks healthy
and proves nothing: that is the one outcome this module exists to rule out.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.utils import timezone

log = logging.getLogger("engine")


class Backoff:
    """Waits that double from ``first`` up to ``cap`` seconds, each drawn from its upper half
    (jitter: engines cut off by one outage do not all come back in the same millisecond)."""

    def __init__(self, first: float = 0.1, cap: float = 5.0, rng: Callable[[], float] = random.random) -> None:
        self.first, self.cap, self.rng = first, cap, rng
        self.tries = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.first * 2 ** min(self.tries, 32))
        self.tries += 1
        return ceiling * (0.5 + 0.5 * self.rng())

    def reset(self) -> None:
        self.tries = 0


@dataclass(frozen=True)
class Down:
    """A thread backing off after a database error."""

    thread: str
    since: datetime
    error: str

    def to_json(self) -> dict[str, str]:
        return {"thread": self.thread, "since": self.since.isoformat(), "error": self.error}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class Health:
    """Which of the engine's threads are down now, and whether one died."""

    def __init__(self, on_death: Callable[[], None] | None = None) -> None:
        self._down: dict[str, Down] = {}
        self._lock = threading.Lock()
        self.death = threading.Event()
        self.dead: str | None = None  # the first thread that died, and why
        self.cause = ""
        self.on_death = on_death
        self.troubled_at = float("-inf")  # when a thread last met a database error (monotonic)

    def mark_down(self, thread: str, exc: BaseException) -> bool:
        """True when the thread was up until now."""
        with self._lock:
            self.troubled_at = time.monotonic()
            first = thread not in self._down
            if first:
                self._down[thread] = Down(thread, timezone.now(), _first_line(exc))
            return first

    def mark_up(self, thread: str) -> bool:
        """True when the thread was down until now."""
        with self._lock:
            return self._down.pop(thread, None) is not None

    def down(self) -> list[Down]:
        with self._lock:
            return sorted(self._down.values(), key=lambda d: d.thread)

    def died(self, thread: str, exc: BaseException) -> None:
        with self._lock:
            if self.dead is None:
                self.dead, self.cause = thread, _first_line(exc)
        self.death.set()
        if self.on_death is not None:
            self.on_death()


def supervise(name: str, step: Callable[[], bool], halt: threading.Event, health: Health,
              backoff: Backoff | None = None) -> None:
    """Run ``step`` until it returns False, riding out database errors (each wait cut short by
    ``halt``, after which the thread gives up); any other exception ends the thread as dead
    (``health.died``), as does another thread's death."""
    backoff = backoff or Backoff()
    while not health.death.is_set():
        try:
            going_on = step()
        except DatabaseError as exc:
            connection.close()  # the next try opens a fresh connection
            wait = backoff.next()
            if health.mark_down(name, exc):
                log.error("engine thread %s: the database failed (%s); trying again with back-off", name,
                          _first_line(exc))
            else:
                log.warning("engine thread %s still down (%s); next try in %.1fs", name, _first_line(exc), wait)
            if halt.wait(wait):
                return
            continue
        except Exception as exc:
            log.exception("engine thread %s died", name)
            health.died(name, exc)
            return
        if backoff.tries:
            backoff.reset()
            if health.mark_up(name):
                log.info("engine thread %s is up again", name)
        if not going_on:
            return


# The errors of a database that went away or cut the session (PostgreSQL restarted, a network
# blip, SQLite locked for too long): worth another try once it is back. Others (a constraint,
# a value the column cannot hold) would fail the same way again.
TRANSIENT = (OperationalError, InterfaceError)


def retry_while_down[T](write: Callable[[], T], seconds: float, what: str,
                        halt: threading.Event | None = None, backoff: Backoff | None = None) -> T:
    """``write()``, tried again while the database is away, for up to ``seconds`` (or until
    ``halt`` is set); the last error is raised once the time is spent."""
    backoff = backoff or Backoff(first=0.05, cap=2.0)
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except TRANSIENT as exc:
            connection.close()
            wait = backoff.next()
            if time.monotonic() + wait > deadline or (halt is not None and halt.is_set()):
                raise
            if backoff.tries == 1:
                log.warning("%s: the database failed (%s); trying again for up to %.0fs", what, _first_line(exc),
                            seconds)
            if halt is not None:
                halt.wait(wait)
            else:
                time.sleep(wait)
