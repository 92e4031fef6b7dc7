"""The read model: the farm, read in one database snapshot into plain frozen data.

``read_farm`` is the only function that reads the live farm. It runs every query of
``engine.status.records`` once, inside the caller's ``one_snapshot()``, and returns a ``Farm``:
hosts, live workers, active jobs and their cells, what is on the GPU, claimed partitions (from
which reservations, keys in use and synthesis counts are derived), counters, deadlines, the GPU
phases utilisation is measured over, and recent failures. ``/status`` and ``/metrics``
(engine.status.farm) and every console fragment (engine.console.reads) are projections of one
``Farm``, pure functions of it that touch no database, so no two of them can count a fact
differently or at two moments.

What a ``Farm`` derives (a worker's state, a host's holdings, a job's cells) is computed once
per instance, on first use, from its own fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any

from engine.ledger.clock import Reading
from engine.status import records, utilisation
from engine.status.holdings import Holdings, holdings
from engine.status.records import DeadlineRow, HostRow

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Farm:
    """One moment of the farm. Row layouts are those of the queries in engine.status.records."""

    now: datetime
    reading: Reading  # every writer's clock in this snapshot; its sum is the farm's version
    exact: bool  # every statement saw the same committed state (see engine.status.read)
    hosts: tuple[HostRow, ...]  # every host, by name
    workers: tuple[Row, ...]  # records.LIVE_WORKERS
    on_gpu: tuple[Row, ...]  # records.ON_GPU
    jobs: tuple[Row, ...]  # records.ACTIVE_JOBS, in the order they are served
    parts: tuple[Row, ...]  # records.ACTIVE_PARTS
    job_counts: tuple[Row, ...]  # records.JOB_COUNTS: (host pk, kind, state, n)
    pending_by_host: Mapping[int | None, int]  # unclaimed partitions of active jobs, by their job's host
    claimed: tuple[Row, ...]  # holdings.CLAIMED
    deadlines: Mapping[int, DeadlineRow]  # active jobs with a deadline, by pk
    missed_deadlines: Mapping[str, int]  # finished after their deadline, by kind
    phases: Mapping[int, tuple[Row, ...]]  # utilisation.GPU_PHASES of the window, by worker pk
    failed_jobs: tuple[Row, ...]  # records.FAILED_JOBS
    failed_parts: tuple[Row, ...]  # records.FAILED_PARTS
    farm_keys: tuple[str, ...]  # records.FARM_KEYS: circuits the farm has a key for

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


def read_farm(now: datetime, *, exact: bool = True) -> Farm:
    """The farm at ``now``, read inside the caller's ``one_snapshot()`` (whose ``exact`` it
    carries): every query once, the status clocks included, so ``version`` names what was read."""
    return Farm(
        now=now,
        reading=records.clocks(),
        exact=exact,
        hosts=tuple(records.host_rows()),
        workers=tuple(records.LIVE_WORKERS.rows()),
        on_gpu=tuple(records.ON_GPU.rows()),
        jobs=tuple(records.ACTIVE_JOBS.rows()),
        parts=tuple(records.ACTIVE_PARTS.rows()),
        job_counts=tuple(records.JOB_COUNTS.rows()),
        pending_by_host=MappingProxyType(dict(records.PENDING.rows())),
        claimed=tuple(records.CLAIMED.rows()),
        deadlines=MappingProxyType(records.active_deadlines(now)),
        missed_deadlines=MappingProxyType(records.missed_deadlines()),
        phases=MappingProxyType({pk: tuple(rows) for pk, rows in utilisation.phases_by_worker(now).items()}),
        failed_jobs=tuple(records.FAILED_JOBS.rows()),
        failed_parts=tuple(records.FAILED_PARTS.rows()),
        farm_keys=tuple(circuit_id for (circuit_id,) in records.FARM_KEYS.rows()),
    )
