"""The read model: the farm, read in one database snapshot into plain frozen data.

``read_farm`` is the only function that reads the live farm. It runs the queries of
``engine.status.records`` inside the caller's ``one_snapshot()``, each once, and returns a ``Farm``:
hosts, live workers, active jobs and their cells, what is on the GPU, claimed partitions (from
which reservations, keys in use and synthesis counts are derived), counters, deadlines, the GPU
phases utilisation is measured over, and recent failures. ``/status`` and ``/metrics``
(engine.status.farm) and every console fragment (engine.console.reads) are projections of one
``Farm``, pure functions of it that touch no database, so no two of them can count a fact
differently or at two moments.

What a ``Farm`` derives (a worker's state, a host's holdings, a job's cells) is computed once
per instance, on first use, from its own fields.

A console pass projects a few panels, not all: ``open_farm`` gives a Farm whose sections are read
on first use while its snapshot is open (a host's heartbeat pass reads the hosts and what they
hold, not a thousand partitions), and ``close`` ends that; a section first asked for after it
raises ``NotRead`` rather than read outside the snapshot. Every section a pass uses is still read
in that one snapshot, so laziness changes what is read, never what it says.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any

from engine.ledger.clock import Reading
from engine.status import records, utilisation
from engine.status.holdings import Holdings, holdings
from engine.status.records import DeadlineRow, HostRow

Row = tuple[Any, ...]


class NotRead(RuntimeError):
    """A section of the farm asked for after its snapshot closed, never having been read in it."""


def _section[T](read: Callable[[Farm], T]) -> cached_property[T]:
    """A part of the farm read by one query, on first use, only while the snapshot is open."""
    def get(farm: Farm) -> T:
        if farm._closed[0]:
            raise NotRead(f"the farm's {read.__name__} was not read in its snapshot (version {farm.version})")
        return read(farm)
    get.__name__ = get.__qualname__ = read.__name__
    get.__doc__ = read.__doc__
    return cached_property(get)


@dataclass(frozen=True, eq=False)
class Farm:
    """One moment of the farm. Row layouts are those of the queries in engine.status.records."""

    now: datetime
    reading: Reading  # every writer's clock in this snapshot; its sum is the farm's version
    exact: bool  # every statement saw the same committed state (see engine.status.read)
    # One cell, so a frozen Farm can still be closed: True once its snapshot has ended.
    _closed: list[bool] = field(default_factory=lambda: [False], repr=False)

    def close(self) -> None:
        """Its snapshot is over: sections not read by now are never read (NotRead)."""
        self._closed[0] = True

    @_section
    def hosts(self) -> tuple[HostRow, ...]:  # every host, by name
        return tuple(records.host_rows())

    @_section
    def workers(self) -> tuple[Row, ...]:  # records.LIVE_WORKERS
        return tuple(records.LIVE_WORKERS.rows())

    @_section
    def on_gpu(self) -> tuple[Row, ...]:  # records.ON_GPU
        return tuple(records.ON_GPU.rows())

    @_section
    def jobs(self) -> tuple[Row, ...]:  # records.ACTIVE_JOBS, in the order they are served
        return tuple(records.ACTIVE_JOBS.rows())

    @_section
    def parts(self) -> tuple[Row, ...]:  # records.ACTIVE_PARTS
        return tuple(records.ACTIVE_PARTS.rows())

    @_section
    def job_counts(self) -> tuple[Row, ...]:  # records.JOB_COUNTS: (host pk, kind, state, n)
        return tuple(records.JOB_COUNTS.rows())

    @_section
    def pending_by_host(self) -> Mapping[int | None, int]:
        """Unclaimed partitions of active jobs, by their job's host."""
        return MappingProxyType(dict(records.PENDING.rows()))

    @_section
    def claimed(self) -> tuple[Row, ...]:  # records.CLAIMED
        return tuple(records.CLAIMED.rows())

    @_section
    def deadlines(self) -> Mapping[int, DeadlineRow]:
        """Active jobs with a deadline, by pk."""
        return MappingProxyType(records.active_deadlines(self.now, self.jobs))

    @_section
    def missed_deadlines(self) -> Mapping[str, int]:
        """Jobs finished after their deadline, by kind."""
        return MappingProxyType(records.missed_deadlines())

    @_section
    def phases(self) -> Mapping[int, tuple[Row, ...]]:
        """utilisation.GPU_PHASES of the window, by worker pk."""
        return MappingProxyType({pk: tuple(rows) for pk, rows in utilisation.phases_by_worker(self.now).items()})

    @_section
    def failed_jobs(self) -> tuple[Row, ...]:  # records.FAILED_JOBS
        return tuple(records.FAILED_JOBS.rows())

    @_section
    def failed_parts(self) -> tuple[Row, ...]:  # records.FAILED_PARTS
        return tuple(records.FAILED_PARTS.rows())

    @_section
    def farm_keys(self) -> tuple[str, ...]:
        """The circuits whose key the farm has adopted (FarmKey), by name."""
        return tuple(circuit_id for (circuit_id,) in records.FARM_KEYS.rows())

    @property
    def version(self) -> int:
        return self.reading.version

    @cached_property
    def live_hosts(self) -> tuple[HostRow, ...]:
        return tuple(host for host in self.hosts if host.stopped_at is None)

    @cached_property
    def held(self) -> Mapping[int, Holdings]:
        """What every host holds (memory by owner, keys and their users, claimed partitions by
        state), derived from this snapshot's claimed partitions and key lists."""
        return MappingProxyType(holdings(self.hosts, self.claimed))

    @cached_property
    def parts_by_job(self) -> Mapping[int, tuple[Row, ...]]:
        return _by_first_column(self.parts)

    def parts_of(self, job_pks: Collection[int]) -> Mapping[int, tuple[Row, ...]]:
        """The partitions of these active jobs, by job: from the whole read where one was made,
        else only theirs (a pass re-drawing two jobs' rows need not read a thousand cells)."""
        if "parts" in self.__dict__ or self._closed[0]:
            return self.parts_by_job
        if not job_pks:
            return MappingProxyType({})
        return _by_first_column(tuple(records.ACTIVE_PARTS_OF.rows(tuple(sorted(job_pks)))))

    @cached_property
    def on_gpu_by_worker(self) -> Mapping[int, tuple[Row, ...]]:
        """A worker is proving exactly when a partition in ``gpu`` names it."""
        return _by_first_column(self.on_gpu)

    @cached_property
    def unclaimed(self) -> int:
        """Partitions of active jobs that no host has claimed: "pending", and only that."""
        return sum(self.pending_by_host.values())

    def utilisation_of(self, worker: Row) -> float:
        """A LIVE_WORKERS row's busy share of the window (engine.status.utilisation, the one
        definition /status, /metrics, the task stream and /history/ share)."""
        pk, host_started = worker[0], worker[5]
        spans = utilisation.spans_of(self.phases.get(pk, ()), self.now)
        return utilisation.utilisation(spans, utilisation.window_start(self.now), self.now, host_started)


def _by_first_column(rows: tuple[Row, ...]) -> Mapping[int, tuple[Row, ...]]:
    grouped: dict[int, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    return MappingProxyType({key: tuple(group) for key, group in grouped.items()})


SECTIONS = ("hosts", "workers", "on_gpu", "jobs", "parts", "job_counts", "pending_by_host", "claimed", "deadlines",
            "missed_deadlines", "phases", "failed_jobs", "failed_parts", "farm_keys")


def open_farm(now: datetime, *, exact: bool = True) -> Farm:
    """The farm at ``now`` inside the caller's ``one_snapshot()`` (whose ``exact`` it carries):
    the status clocks now, so ``version`` names the snapshot, and each section on first use.
    The caller closes it before its snapshot ends."""
    return Farm(now=now, reading=records.clocks(), exact=exact)


def read_farm(now: datetime, *, exact: bool = True) -> Farm:
    """The whole farm at ``now``, read inside the caller's ``one_snapshot()``: every query once,
    the status clocks first, then closed, so it can leave the snapshot."""
    farm = open_farm(now, exact=exact)
    for name in SECTIONS:
        getattr(farm, name)
    farm.close()
    return farm
