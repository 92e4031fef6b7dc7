"""What a console pass swaps: units (one element with a stable id) and the fragments they form.

The busy fragments are trees of units, each an element with a stable id of its own that the
stream can swap by itself: the pipelines panel holds a row per job (a head, and a cell per
partition), the workers panel a card per worker, the task stream a lane per worker. A
transition then costs the few hundred bytes of the units it changed, not a whole panel. A
unit's digest covers its own shape only (which children, in which order), so a changed cell
does not resend its row; a unit whose shape changed (a job started or ended, a worker came)
is sent whole, children included.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

from django.template.loader import get_template
from django.utils.html import escape

from engine.format import epoch_ms, fmt_ms, ms_between
from engine.status.read_model import Farm

VERSION_TOKEN = "__PS_VERSION__"
# Where a made unit's ticking text goes (engine.console.markup): the templates write the
# markup around it once, and each pass fills in only the text.
TICK_MARK = "\x00"
DUE_MARK = "\x01"
PIECES = "console/units.html"


def piece(name: str, **context: Any) -> str:
    """One of the small pieces of console/units.html (a ticking duration, a deadline, the
    server's clock), rendered with ``context`` alone."""
    return get_template(f"{PIECES}#{name}").render(context)


def render_partial(template: str, **context: Any) -> str:
    """A fragment's partial (``"console/fragments/x.html#name"``), rendered with ``context``."""
    return get_template(template).render(context)


# A stencil's slot: what a value is rendered as once, to be filled in for each unit.
_SLOT = "\x02{}\x03"
_SLOTS = re.compile("\x02(\\d+)\x03")


class Stencil:
    """A partial rendered once with a slot in place of each value, then filled in for each unit:
    the markup is all the template's, and a unit costs a join rather than a render (a busy
    console makes thousands of cells; a template's per-variable cost was most of a pass's).
    Values go in as the template would put them: text escaped, markup as it is."""

    __slots__ = ("literals", "order")

    def __init__(self, html: str) -> None:
        parts = _SLOTS.split(html)
        self.literals = parts[0::2]
        self.order = [int(i) for i in parts[1::2]]

    def fill(self, values: tuple[str, ...]) -> str:
        out = [self.literals[0]]
        for slot, literal in zip(self.order, self.literals[1:], strict=True):
            out += (values[slot], literal)
        return "".join(out)


@lru_cache(maxsize=512)
def _stencil(template: str, names: tuple[str, ...], fixed: tuple[tuple[str, Any], ...]) -> Stencil:
    return Stencil(render_partial(template, **dict(fixed), **{name: _SLOT.format(i) for i, name in enumerate(names)}))


def stencilled(template: str, values: Mapping[str, str], **fixed: Any) -> str:
    """``template`` (a partial) with ``values`` (text escaped by the caller, or markup) in its
    slots; ``fixed`` holds what its conditions test (an absent attribute's empty value), each
    combination rendered once. A value must be used bare in the template (``{{ name }}``, no
    filter), and a condition's value must be fixed, not a slot (a slot is always true)."""
    return _stencil(template, tuple(values), tuple(sorted(fixed.items()))).fill(tuple(values.values()))


@cache
def oob_attribute() -> str:
    """The attribute that makes a unit sent by itself an out-of-band swap (console/units.html#oob)."""
    return piece("oob")


@dataclass(frozen=True)
class Unit:
    """One swappable element. `html` is its markup as nested in its parent, VERSION_TOKEN where
    the version goes; None when the pass read only its shape (its children were not all read).
    `oob_at` is where the swap attribute goes when it is sent by itself (0 for a fragment's
    root, whose markup carries it already). `digest` changes exactly when it must be sent."""

    key: str
    html: str | None
    digest: str
    children: tuple[str, ...] = ()
    oob_at: int = 0


_TICKING_TEXT = re.compile(r'(data-(?:started|due)-at="\d+"[^>]*>)[^<]*')


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def content_digest(html: str) -> str:
    """The text of a ticking duration is the server's "now" minus an unchanged start (or a
    deadline minus "now"); the browser computes it anyway, so it is not a change worth sending."""
    return digest(_TICKING_TEXT.sub(r"\1", html))


def unit(key: str, html: str) -> Unit:
    """A child unit: one element of a partial's markup, its digest from its content. Sent by
    itself, its swap attribute goes at the end of its opening tag (a template's values are
    escaped, so the first ">" is that tag's)."""
    return Unit(key, html, content_digest(html), oob_at=html.index(">"))


def ticking_text(started: datetime, now: datetime) -> str:
    """A running phase's duration at ``now``, as the browser writes it between flushes."""
    return fmt_ms(ms_between(started, now))


def tick_marked(started: datetime | None, text: str, suffix: str = "", css: str = "tick") -> str:
    """console/units.html#tick with ``text`` (a made unit's TICK_MARK) for its figure."""
    if started is None:
        return stencilled(f"{PIECES}#tick", {}, started_ms=None, css=css)
    values = {"started_ms": str(epoch_ms(started)), "text": escape(text)}
    if suffix:
        values["suffix"] = escape(suffix)
    return stencilled(f"{PIECES}#tick", values, css=css, **({} if suffix else {"suffix": ""}))


def final(text: str, suffix: str = "") -> str:
    """A finished figure (console/units.html#final)."""
    return stencilled(f"{PIECES}#final", {"text": escape(text), "suffix": escape(suffix)})


DEADLINE_STATES = ("on-time", "at-risk", "late", "missed")


def deadline_state(at_risk: bool, late: bool, missed: bool = False) -> str:
    """A job against its deadline in one word, as data-deadline-state and the CSS name it."""
    return "missed" if missed else "late" if late else "at-risk" if at_risk else "on-time"


def deadline_text(deadline: datetime, state: str, now: datetime, finished: datetime | None = None) -> str:
    """"due in 4m 12s", "at risk: due in 8.0s", "late by 3.0s"; for a finished job, how its
    finish stood against the deadline."""
    if finished is not None:
        gap = ms_between(finished, deadline) or 0
        return f"missed its deadline by {fmt_ms(-gap)}" if gap < 0 else f"finished {fmt_ms(gap)} before its deadline"
    if state == "late":
        return f"late by {fmt_ms(ms_between(deadline, now))}"
    return f'{"at risk: " if state == "at-risk" else ""}due in {fmt_ms(max(ms_between(now, deadline) or 0, 0))}'


def deadline_span(deadline: datetime, state: str, now: datetime, risk_at: datetime | None = None,
                  finished: datetime | None = None) -> str:
    """A job's deadline as the console shows it (console/units.html#deadline): an active job's
    counts down in the browser (data-due-at; it turns at risk at data-risk-at and late once the
    deadline passes, until the next flush says so too); a finished job's is final."""
    if finished is not None:
        return stencilled(f"{PIECES}#deadline", {"state": escape(state),
                                                 "text": escape(deadline_text(deadline, state, now, finished))},
                          due_ms=None)
    return deadline_marked(deadline, state, risk_at, deadline_text(deadline, state, now))


def deadline_marked(deadline: datetime, state: str, risk_at: datetime | None, text: str) -> str:
    """An active job's countdown with ``text`` for its words (a made unit's DUE_MARK)."""
    values = {"state": escape(state), "due_ms": str(epoch_ms(deadline)), "text": escape(text)}
    if risk_at is not None:
        values["risk_ms"] = str(epoch_ms(risk_at))
    return stencilled(f"{PIECES}#deadline", values, **({} if risk_at is not None else {"risk_ms": None}))


# A fragment's read: (the pass's Farm, engine.status.read_model; the jobs whose pipeline rows
# to build — None for every row —; the root digests the caller holds) → the context its build
# turns into units.
Reader = Callable[[Farm, "set[str] | None", Mapping[str, str]], dict[str, Any]]


@dataclass(frozen=True)
class Fragment:
    """A live panel: its DOM id, its read, the build of its units, and which hint scopes
    (host, job, partition) make it worth re-reading."""

    name: str
    dom_id: str
    read: Reader
    build: Callable[[Fragment, dict[str, Any], datetime], list[Unit]]
    affected_by: frozenset[str]

