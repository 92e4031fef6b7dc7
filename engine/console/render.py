"""A render pass: the wanted fragments projected from the farm as one database snapshot holds
it (engine.status.read_model, reading only what they use), then built.

Every writer's status clock is read inside the same snapshot (``engine.status.read.one_snapshot``),
so the farm version stamped on every unit is exactly the version its content was read at.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from engine.console.fragments import ALL, HOST, JOB, PARTITION, REGISTRY, Want, scope_names
from engine.console.units import VERSION_TOKEN, Unit, oob_attribute, piece
from engine.format import epoch_ms
from engine.ledger.clock import Reading
from engine.status.changes import changed_since
from engine.status.read import collection_deferred
from engine.status.read_model import live_farm


@dataclass
class Rendered:
    """Units read at one version, keyed by unit; `roots` are the fragments of the pass."""

    version: int
    now: datetime
    units: dict[str, Unit] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)
    # False only when the read joined a caller's READ COMMITTED transaction (not one snapshot):
    # the stamp then says so with a trailing "+" rather than claim an exact version.
    consistent: bool = True
    # Every fragment and every unit was read (a snapshot).
    full: bool = False
    # Every writer's clock as the pass read it: a later pass reads what was written after it.
    reading: Reading = field(default_factory=lambda: Reading({}))

    @property
    def stamp(self) -> str:
        return str(self.version) if self.consistent else f"{self.version}+"

    def html(self, name: str) -> str:
        """A whole fragment, as the page embeds it."""
        body = self.units[name].html
        if body is None:
            raise ValueError(f"{name} was read in part; render it in full for its HTML")
        return body.replace(VERSION_TOKEN, self.stamp)

    def oob(self, key: str) -> str:
        """A unit as a stand-alone out-of-band swap."""
        unit = self.units[key]
        if unit.html is None:
            raise ValueError(f"{key} was read in part")
        body = unit.html if not unit.oob_at else unit.html[:unit.oob_at] + oob_attribute() + unit.html[unit.oob_at:]
        return body.replace(VERSION_TOKEN, self.stamp)

    def digest(self, key: str) -> str:
        return self.units[key].digest

    def descendants(self, key: str) -> Iterator[Unit]:
        for child in self.units[key].children:
            if child in self.units:
                yield self.units[child]
                yield from self.descendants(child)



def want_changed_since(want: Want, since: Reading) -> Want:
    """``want`` plus every unit whose records were written after ``since`` (the clocks the
    previous pass read; engine.status.changes reads what moved). Hints say what to look at, but
    one can arrive after the pass that reads its commit: a card re-read for another hint would
    then show a partition on the GPU while that partition's cell, not hinted yet, still showed
    it waiting. Reading what the versions say changed puts every unit of the frame at the same
    snapshot."""
    moved = changed_since(since)
    out = Want(set(want.names), None if want.jobs is None else set(want.jobs))
    if moved.partitions_of:
        out.names |= scope_names(PARTITION)
    if moved.jobs:
        out.names |= scope_names(JOB)
    if moved.hosts:
        out.names |= scope_names(HOST)
    if out.jobs is not None:
        out.jobs |= moved.partitions_of | moved.jobs
    return out


def render(want: Want | Iterable[str] = ALL, known: Mapping[str, str] | None = None,
           since: Reading | None = None) -> Rendered:
    """Read the wanted fragments in one database snapshot, the status clock included, so the
    version stamped on every unit is exactly the version its content was read at.

    With ``since`` (the clocks the caller's previous pass read), everything written after it
    is read too, so the pass shows every change up to its own version. Markup is built after
    the reads: the contexts hold evaluated rows. `known` holds the digests of the roots the
    caller last received, so a panel whose shape moved is read whole.
    """
    with collection_deferred():
        return _render(want, known, since)


def _render(want: Want | Iterable[str], known: Mapping[str, str] | None, since: Reading | None) -> Rendered:
    if not isinstance(want, Want):
        want = Want(set(want), None)
    known = known or {}
    with live_farm(timezone.now()) as farm:
        if since is not None and not want.full:
            want = want_changed_since(want, since)
        wanted = [REGISTRY[n] for n in sorted(want.names)]
        # The panels are projections of the farm, which reads in this snapshot what they
        # use and nothing else; a job's page reads its job in it too.
        contexts = {f.name: f.read(farm, want.jobs, known) for f in wanted}
    now = farm.now
    units: dict[str, Unit] = {}
    for f in wanted:
        for unit in f.build(f, contexts[f.name], now):
            units[unit.key] = unit
    return Rendered(farm.version, now, units, [f.name for f in wanted], reading=farm.reading, consistent=farm.exact,
                    full=want.full)


def clock_span(now_ms: int | None, version: int | str) -> str:
    """The server's clock and version (console/units.html#clock), swapped in with every flush so
    the browser can correct its own clock's skew before ticking durations."""
    return piece("clock", now_ms=now_ms, version=version)


def clock_html(rendered: Rendered) -> str:
    """The clock as a page embeds it: the moment and version its pass read."""
    return clock_span(epoch_ms(rendered.now), rendered.stamp)
