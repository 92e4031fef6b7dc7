"""The read model: the farm, read in one database snapshot into plain frozen data.

``live_farm`` is the one way to read the live farm: a context manager that opens one snapshot
(or joins the caller's), reads the status clocks in it, and yields a ``Farm`` whose sections
each run one query of ``engine.status.records`` on first use while the block runs; when it
ends the farm is closed, and a section first asked for after that raises ``NotRead`` rather
than read outside the snapshot. ``/status`` and ``/metrics`` (engine.status.farm) and every
console fragment (engine.console.reads) are projections of one ``Farm``, pure functions of it
that touch no database, so no two of them can count a fact differently or at two moments;
a console pass reads only the sections its panels use (a heartbeat's pass reads the hosts,
not a thousand partitions), which changes what is read, never what it says.

What a ``Farm`` derives (a worker's state, a host's holdings, a job's cells) is computed once
per instance, on first use, from its own fields.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from django.utils import timezone

from engine import figures
from engine.ledger.clock import Reading
from engine.models import Circuit
from engine.status import records, utilisation
from engine.status.holdings import Holdings, holdings
from engine.status.read import collection_deferred, one_snapshot
from engine.status.records import (
    ActiveJobRow,
    ClaimedRow,
    DeadlineRow,
    FailedJobRow,
    FailedPartRow,
    HostRow,
    JobCountRow,
    OnGpuRow,
    PartRow,
    WorkerRow,
)
from engine.status.utilisation import PhaseRow


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
    """One moment of the farm: the named rows of the queries in engine.status.records."""

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
    def workers(self) -> tuple[WorkerRow, ...]:  # records.LIVE_WORKERS
        return tuple(records.LIVE_WORKERS.rows())

    @_section
    def on_gpu(self) -> tuple[OnGpuRow, ...]:  # records.ON_GPU
        return tuple(records.ON_GPU.rows())

    @_section
    def jobs(self) -> tuple[ActiveJobRow, ...]:  # records.ACTIVE_JOBS, in the order they are served
        return tuple(records.ACTIVE_JOBS.rows())

    @_section
    def parts(self) -> tuple[PartRow, ...]:  # records.ACTIVE_PARTS
        return tuple(records.ACTIVE_PARTS.rows())

    @_section
    def job_counts(self) -> tuple[JobCountRow, ...]:  # records.JOB_COUNTS
        return tuple(records.JOB_COUNTS.rows())

    @_section
    def pending_by_host(self) -> Mapping[int | None, int]:
        """Unclaimed partitions of active jobs, by their job's host."""
        return MappingProxyType(dict(records.PENDING.rows()))

    @_section
    def claimed(self) -> tuple[ClaimedRow, ...]:  # records.CLAIMED
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
    def phases(self) -> Mapping[int, tuple[PhaseRow, ...]]:
        """utilisation.GPU_PHASES of the window, by worker pk."""
        return MappingProxyType({pk: tuple(rows) for pk, rows in utilisation.phases_by_worker(self.now).items()})

    @_section
    def failed_jobs(self) -> tuple[FailedJobRow, ...]:  # records.FAILED_JOBS
        return tuple(records.FAILED_JOBS.rows())

    @_section
    def failed_parts(self) -> tuple[FailedPartRow, ...]:  # records.FAILED_PARTS
        return tuple(records.FAILED_PARTS.rows())

    @_section
    def farm_keys(self) -> tuple[str, ...]:
        """The circuits whose key the farm has adopted (FarmKey), by name."""
        return tuple(circuit_id for (circuit_id,) in records.FARM_KEYS.rows())

    @_section
    def circuit_names(self) -> Mapping[str, str]:
        """Each registered circuit's name, by the circuit id its jobs and keys carry
        (``circom/<sha256>``); a circuit registered without one is left out."""
        return MappingProxyType({Circuit.job_circuit_id_of(pk): name for pk, name in records.CIRCUIT_NAMES.rows() if name})

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
    def parts_by_job(self) -> Mapping[int, tuple[PartRow, ...]]:
        return _grouped(self.parts, attrgetter("job"))

    def parts_of(self, job_pks: Collection[int]) -> Mapping[int, tuple[PartRow, ...]]:
        """The partitions of these active jobs, by job: from the whole read where one was made,
        else only theirs (a pass re-drawing two jobs' rows need not read a thousand cells)."""
        if "parts" in self.__dict__ or self._closed[0]:
            return self.parts_by_job
        if not job_pks:
            return MappingProxyType({})
        return _grouped(tuple(records.ACTIVE_PARTS_OF.rows(tuple(sorted(job_pks)))), attrgetter("job"))

    @cached_property
    def on_gpu_by_worker(self) -> Mapping[int, tuple[OnGpuRow, ...]]:
        """A worker is proving exactly when a partition in ``gpu`` names it."""
        return _grouped(self.on_gpu, attrgetter("worker"))

    @cached_property
    def unclaimed(self) -> int:
        """Partitions of active jobs that no host has claimed: "pending", and only that."""
        return sum(self.pending_by_host.values())

    def utilisation_of(self, worker: WorkerRow) -> float:
        """A worker's UTILISATION over the live window (engine.figures: the one definition
        /status, /metrics, the task stream and /history/ share), observed from its host's start."""
        spans = utilisation.spans_of(self.phases.get(worker.pk, ()), self.now)
        return figures.utilisation(spans, utilisation.window_start(self.now), self.now, worker.host_started_at)

    def read_all(self) -> Farm:
        """Every section read now (inside the snapshot), so the farm can be kept after it."""
        for name in SECTIONS:
            getattr(self, name)
        return self


def _grouped[R: tuple[Any, ...]](rows: tuple[R, ...], key: Callable[[R], int]) -> Mapping[int, tuple[R, ...]]:
    """The rows by ``key`` (a job's pk, a worker's), each group in the rows' order."""
    grouped: dict[int, list[R]] = {}
    for row in rows:
        grouped.setdefault(key(row), []).append(row)
    return MappingProxyType({key: tuple(group) for key, group in grouped.items()})


SECTIONS = ("hosts", "workers", "on_gpu", "jobs", "parts", "job_counts", "pending_by_host", "claimed", "deadlines",
            "missed_deadlines", "phases", "failed_jobs", "failed_parts", "farm_keys", "circuit_names")


@contextmanager
def live_farm(now: datetime | None = None, *, whole: bool = False) -> Iterator[Farm]:
    """The farm at ``now`` (default: the clock's now), read in one snapshot: its own, or the
    caller's when inside one (whose ``exact`` it carries). The status clocks are read first, so
    ``version`` names the snapshot; each section on first use, or all of them at once with
    ``whole`` (a farm kept after the block). Closed when the block ends."""
    with collection_deferred(), one_snapshot() as snap:
        farm = Farm(now=now or timezone.now(), reading=records.clocks(), exact=snap.exact)
        try:
            yield farm.read_all() if whole else farm
        finally:
            farm.close()
