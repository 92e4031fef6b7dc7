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
from typing import Any

from engine.format import epoch_ms, fmt_ms, ms_between

VERSION_TOKEN = "__PS_VERSION__"
OOB_ATTR = ' hx-swap-oob="true"'


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


_TICKING_TEXT = re.compile(r'(data-started-at="\d+"[^>]*>)[^<]*')


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def content_digest(html: str) -> str:
    """The text of a ticking duration is the server's "now" minus an unchanged start; the
    browser computes it anyway, so it is not a change worth sending."""
    return digest(_TICKING_TEXT.sub(r"\1", html))


def leaf(key: str, dom_id: str, rest: str) -> Unit:
    """A child unit: `<div id="dom_id"` + rest, its digest from its content."""
    opening = f'<div id="{dom_id}"'
    html = opening + rest
    return Unit(key, html, content_digest(html), oob_at=len(opening))


def tick(started: datetime | None, now: datetime, suffix: str = "", css: str = "tick") -> str:
    if started is None:
        return f'<span class="{css}">—</span>'
    suffix_attr = f' data-suffix="{suffix}"' if suffix else ""
    return (f'<span class="{css}" data-started-at="{epoch_ms(started)}"{suffix_attr}>'
            f"{fmt_ms(ms_between(started, now))}{suffix}</span>")


# A fragment's read: (the server's now, the jobs whose pipeline rows to read — None for every
# row —, the root digests the caller holds) → the context its build turns into units.
Reader = Callable[[datetime, "set[str] | None", Mapping[str, str]], dict[str, Any]]


@dataclass(frozen=True)
class Fragment:
    """A live panel: its DOM id, its read, the build of its units, and which hint scopes
    (host, job, partition) make it worth re-reading."""

    name: str
    dom_id: str
    read: Reader
    build: Callable[[Fragment, dict[str, Any], datetime], list[Unit]]
    affected_by: frozenset[str]

