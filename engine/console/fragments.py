"""The console's fragments: which panels there are, and which record changes affect which.

Every fragment is a projection of the pass's Farm (engine.console.reads) and a build of its markup
(engine.console.markup) under a stable DOM id, so the page, a reload and the SSE stream all
show the same truth. A hint's scope (a host's own change, a job's, a partition's) says which
fragments it touches; the stream re-reads only those, and for the pipelines panel only the
hinted jobs' rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.console import reads
from engine.console.job_markup import job_detail_units
from engine.console.jobs_table import JobsQuery, jobs_units
from engine.console.jobs_table import read as read_jobs
from engine.console.markup import pipelines_units, taskstream_units, templated, workers_units
from engine.console.units import Fragment, Reader, Unit
from engine.status.read_model import Farm

# The scope of a hint is its most specific field: a partition's transition, a job's, or a
# host's own change (heartbeat, memory, keys). See scope_of().
HOST, JOB, PARTITION = "host", "job", "partition"


def _plain(context: Callable[[Farm], dict[str, Any]]) -> Reader:
    def read(farm: Farm, jobs: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
        return context(farm)
    return read


def _fragment(name: str, read: Reader, *scopes: str,
              build: Callable[[Fragment, dict[str, Any], datetime], list[Unit]] = templated) -> Fragment:
    return Fragment(name, f"frag-{name}", read, build, frozenset(scopes))


# A job's own page shows one fragment more, named for the job: "job:<job_id>".
DETAIL = "job:"


def detail_name(job_id: str) -> str:
    return f"{DETAIL}{job_id}"


def _detail(job_id: str) -> Fragment:
    def read(farm: Farm, jobs: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
        return reads.job_detail_context(job_id, farm)
    # One per page, so one DOM id; a job's rows and head move with its job and partition hints,
    # its key line with a host's (a key loaded or evicted is a change of the host's row).
    return Fragment(detail_name(job_id), "frag-job", read, job_detail_units, frozenset({JOB, PARTITION, HOST}))


# The jobs page shows one more, named for its query in canonical form: "jobs:<query>".
JOBS = "jobs:"


def jobs_name(query: JobsQuery) -> str:
    return f"{JOBS}{query.encoded()}"


def _jobs(encoded: str) -> Fragment:
    query = JobsQuery.decode(encoded)

    def read(farm: Farm, jobs: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
        return read_jobs(query, farm)
    # A job's submission, transition or end can move it into, out of or along the table.
    return Fragment(jobs_name(query), "frag-jobs", read, jobs_units, frozenset({JOB, PARTITION}))


class Registry(dict[str, Fragment]):
    """The console's panels, by name. Iterating yields the panels only; looking up a job's
    detail name ("job:<job_id>") gives that job's fragment, and a jobs page's name
    ("jobs:<query>") the table of that query, so a render pass reads a page's fragment in the
    same snapshot as the panels, by the same lookup."""

    def __missing__(self, name: str) -> Fragment:
        if name.startswith(DETAIL):
            return _detail(name[len(DETAIL):])
        if name.startswith(JOBS):
            return _jobs(name[len(JOBS):])
        raise KeyError(name)


REGISTRY: Registry = Registry({f.name: f for f in [
    _fragment("hosts", _plain(reads.hosts_context), HOST),
    # Memory is what the claimed partitions and the resident keys hold: a partition's transition
    # moves it, a job's cancel too (its partitions end with it), a key's load or eviction (a host
    # hint). Devices are the host's measured samples.
    _fragment("memory", _plain(reads.memory_context), HOST, JOB, PARTITION),
    _fragment("devices", _plain(reads.devices_context), HOST),
    # Synthesis counts partitions in `synthesizing`: a partition's transition moves it; its
    # pending count and throttling reason move with a job's submission too.
    _fragment("synthesis", _plain(reads.synthesis_reasons_context), HOST, JOB, PARTITION),
    _fragment("counters", _plain(reads.counters_context), JOB, PARTITION),
    _fragment("pipelines", reads.pipelines_context, JOB, PARTITION, build=pipelines_units),
    # A cancelled job's partitions leave the GPU and release their keys in the cancel's own
    # transaction, which is a job hint.
    _fragment("workers", reads.workers_context, HOST, JOB, PARTITION, build=workers_units),
    _fragment("keys", _plain(reads.keys_context), HOST, JOB, PARTITION),
    _fragment("failures", _plain(reads.failures_context), JOB, PARTITION),
    # Hosts and workers come and go rarely; the stream's periodic full pass picks them up.
    _fragment("taskstream", reads.taskstream_context, JOB, PARTITION, build=taskstream_units),
]})
ALL = frozenset(REGISTRY)


def scope_of(hint: dict[str, Any]) -> str:
    """A partition transition names its job and host too; what changed is the partition."""
    if hint.get("partition") is not None:
        return PARTITION
    if hint.get("job"):
        return JOB
    return HOST


def affected(hint: dict[str, Any]) -> frozenset[str]:
    scope = scope_of(hint)
    return frozenset(f.name for f in REGISTRY.values() if scope in f.affected_by)


def scope_names(scope: str) -> set[str]:
    """The fragments a change of this scope can move."""
    return {f.name for f in REGISTRY.values() if scope in f.affected_by}


@dataclass
class Want:
    """What a render pass re-reads: fragment names, and for the pipelines panel which jobs'
    rows (None: every row)."""

    names: set[str] = field(default_factory=set)
    jobs: set[str] | None = field(default_factory=set)

    @classmethod
    def everything(cls) -> Want:
        return cls(set(ALL), None)

    @property
    def full(self) -> bool:
        return self.jobs is None and self.names >= ALL

    def __bool__(self) -> bool:
        return bool(self.names)

    def add_hint(self, hint: dict[str, Any]) -> None:
        names = affected(hint)
        self.names |= names
        if "pipelines" in names and self.jobs is not None:
            job = hint.get("job")
            if job:
                self.jobs.add(str(job))
            else:  # a partition without its job: look everywhere
                self.jobs = None

    def merge(self, other: Want) -> None:
        self.names |= other.names
        if self.jobs is not None:
            self.jobs = None if other.jobs is None else self.jobs | other.jobs

