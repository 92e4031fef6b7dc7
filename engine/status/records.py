"""The one set of queries the farm is read with (by engine.status.read_model.read_farm, and
nothing else): each fact has one query and one filter here, so two views can never count it
differently. GPU phases are utilisation's own query (engine.status.utilisation), beside its
one definition of busy. Each query is compiled once (engine.status.prepared).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Count, F, Sum

from engine.ledger.clock import Reading
from engine.ledger.deadlines import Standing, at_risk_from, expected_seconds, standing_of
from engine.models import Circuit, EngineHost, FarmKey, Partition, ProofJob, StatusClock, Worker
from engine.states import JOB_ACTIVE, PARTITION_LIVE, JobState, PartitionState
from engine.status.prepared import Prepared

CLOCKS: Prepared[tuple[int, int]] = Prepared(lambda: StatusClock.objects.order_by("pk").values_list("pk", "value"))


class HostRow(NamedTuple):
    """A host's row as the readers show it: plain values, not a model instance (the console's
    templates read ``name`` and ``backend`` as they would a model's)."""

    pk: int
    name: str
    backend: str
    started_at: datetime | None
    heartbeat_at: datetime | None
    stopped_at: datetime | None
    memory_budget_bytes: int
    memory_total_bytes: int
    synthesis_max: int
    devices: list[Any]  # JSON, read through host_report.devices_of
    key_cache: list[Any]  # JSON, read through host_report.keys_of
    draining: bool
    refused_keys: dict[str, str]  # JSON: circuit -> why
    figures: dict[str, Any]  # JSON, read through host_report.HostFigures.from_json
    reserved_by_engine: dict[str, Any]  # JSON: owner -> bytes (engine.status.holdings.engine_held)
    device_reserved: dict[str, Any]  # JSON: device -> {budget, by_owner} (engine.status.holdings.device_reserved)


_HOSTS = Prepared(lambda: EngineHost.objects.order_by("name").values_list(*HostRow._fields), HostRow)


class WorkerRow(NamedTuple):
    """A worker of a running host."""

    pk: int
    ordinal: int
    device: str
    host: str  # its host's name
    backend: str
    host_started_at: datetime | None


LIVE_WORKERS = Prepared(lambda: Worker.objects.filter(host__stopped_at__isnull=True)
                        .order_by("host__name", "device", "ordinal")
                        .values_list("pk", "ordinal", "device", "host__name", "host__backend", "host__started_at"),
                        WorkerRow)


class OnGpuRow(NamedTuple):
    """A partition in ``gpu``: a worker is proving exactly when one names it."""

    worker: int  # the worker's pk
    number: int  # the partition's index in its job (P3: 3)
    job_id: str
    kind: str
    gpu_started_at: datetime
    batch: str  # its batch's marker ('' alone)


ON_GPU = Prepared(lambda: Partition.objects.filter(state=PartitionState.GPU, worker__host__stopped_at__isnull=True)
                  .order_by("gpu_started_at", "pk")
                  .values_list("worker_id", "index", "job__job_id", "job__kind", "gpu_started_at", "batch"), OnGpuRow)


class ActiveJobRow(NamedTuple):
    """An active job, in the order jobs are served."""

    pk: int
    job_id: str
    kind: str
    state: str
    priority: int
    started_at: datetime | None
    submitted_at: datetime
    num_partitions: int
    deadline: datetime | None
    circuit_id: str


ACTIVE_JOBS = Prepared(lambda: ProofJob.objects.filter(state__in=JOB_ACTIVE)
                       .order_by("priority", F("latest_start_at").asc(nulls_last=True), "submitted_at", "pk")
                       .values_list(*ActiveJobRow._fields), ActiveJobRow)


class PartRow(NamedTuple):
    """A partition of an active job, as plain values (model instances were most of a read's
    cost)."""

    job: int  # its job's pk
    number: int  # its index in the job (P3: 3)
    state: str
    synth_started_at: datetime | None
    synth_finished_at: datetime | None
    gpu_started_at: datetime | None
    gpu_finished_at: datetime | None
    host: str | None  # its host's name
    worker: int | None  # its worker's ordinal
    attempt: int
    batch: str


_PART_COLUMNS = ("job_id", "index", "state", "synth_started_at", "synth_finished_at", "gpu_started_at",
                 "gpu_finished_at", "host__name", "worker__ordinal", "attempt", "batch")
ACTIVE_PARTS = Prepared(lambda: Partition.objects.filter(job__state__in=JOB_ACTIVE).order_by("job_id", "index")
                        .values_list(*_PART_COLUMNS), PartRow)
# The same rows for some of those jobs only (by pk): a pass re-drawing a few jobs' cells.
ACTIVE_PARTS_OF = Prepared(lambda pks: Partition.objects.filter(job__state__in=JOB_ACTIVE, job_id__in=pks)
                           .order_by("job_id", "index").values_list(*_PART_COLUMNS), PartRow)


class JobCountRow(NamedTuple):
    host: int | None  # the host's pk (None: never claimed)
    kind: str
    state: str
    n: int


JOB_COUNTS = Prepared(lambda: ProofJob.objects.values("host_id", "kind", "state").annotate(n=Count("pk"))
                      .values_list("host_id", "kind", "state", "n").order_by(), JobCountRow)

# Finished jobs that finished after their deadline, by kind: (kind, n). Kept history only grows.
DEADLINES_MISSED: Prepared[tuple[str, int]] = Prepared(lambda: ProofJob.objects.exclude(state__in=JOB_ACTIVE)
                            .filter(deadline__isnull=False, finished_at__gt=F("deadline"))
                            .values("kind").annotate(n=Count("pk")).values_list("kind", "n").order_by("kind"))

# Pending partitions of active jobs, by their job's host: pending means unclaimed, and only
# that (a claimed one is `reserving`). (host pk, n)
PENDING: Prepared[tuple[int | None, int]] = Prepared(lambda: Partition.objects.filter(state=PartitionState.PENDING, job__state__in=JOB_ACTIVE)
                   .values("job__host_id").annotate(n=Count("pk")).values_list("job__host_id", "n").order_by())


class ClaimedRow(NamedTuple):
    """Claimed partitions of one host, state and job (its kind and circuit name its key), with
    the bytes they reserved: one grouped read gives the counts, the key users and the memory
    owners (engine.status.holdings)."""

    host: int
    state: str
    kind: str
    job_id: str
    circuit_id: str
    n: int
    reserved: int | None


CLAIMED = Prepared(lambda: Partition.objects.filter(state__in=PARTITION_LIVE, host__isnull=False)
                   .values("host_id", "state", "job__kind", "job__job_id", "job__circuit_id")
                   .annotate(n=Count("pk"), reserved=Sum("reserved_bytes"))
                   .values_list("host_id", "state", "job__kind", "job__job_id", "job__circuit_id", "n", "reserved")
                   .order_by(), ClaimedRow)

# The circuits the farm has a proving key for (FarmKey: the first host to load one records it),
# by circuit id: (circuit id,). A host holding one cold can be asked to preload it.
FARM_KEYS: Prepared[tuple[str]] = Prepared(lambda: FarmKey.objects.order_by("circuit_id").values_list("circuit_id"))
CIRCOM = Circuit.job_circuit_id_of("")  # "circom/": a registered circuit's jobs carry circom/<its id>
# Each registered circom circuit's name, by its id (the zkey's SHA-256): pages name a circuit
# as its owner registered it, not by 64 hex digits.
CIRCUIT_NAMES: Prepared[tuple[str, str]] = Prepared(lambda: Circuit.objects.order_by("pk").values_list("pk", "name"))


class FailedJobRow(NamedTuple):
    job_id: str
    kind: str
    error: str


class FailedPartRow(NamedTuple):
    number: int  # the partition's index in its job
    job_id: str
    attempt: int
    error: str


# The latest failures, newest first.
RECENT_FAILURES = 8
FAILED_JOBS = Prepared(lambda: ProofJob.objects.filter(state=JobState.FAILED).order_by("-finished_at", "-pk")
                       .values_list("job_id", "kind", "error")[:RECENT_FAILURES], FailedJobRow)
FAILED_PARTS = Prepared(lambda: Partition.objects.filter(state=PartitionState.FAILED).order_by("-finished_at", "-pk")
                        .values_list("index", "job__job_id", "attempt", "error")[:RECENT_FAILURES], FailedPartRow)


def clocks() -> Reading:
    """Every writer's status clock, read inside the reader's snapshot: what it saw (see
    engine.ledger.clock), whose sum is the farm's version."""
    return Reading(dict(CLOCKS.rows()))


def current_version() -> int:
    return clocks().version


class DeadlineRow(NamedTuple):
    """An active job against its deadline now, and when it turns at risk if the clock alone
    decides (engine.ledger.deadlines.at_risk_from)."""

    standing: Standing
    at_risk_from: datetime | None


def active_deadlines(now: datetime, active_jobs: Iterable[ActiveJobRow]) -> dict[int, DeadlineRow]:
    """Every active job with a deadline, by pk, against it at ``now``, from ACTIVE_JOBS rows:
    its circuit's expected duration is read once per call for the circuits of those jobs (they
    are few)."""
    jobs = [job for job in active_jobs if job.deadline is not None]
    if not jobs:
        return {}
    expected = expected_seconds(job.circuit_id for job in jobs)
    out = {}
    for job in jobs:
        assert job.deadline is not None
        seconds = expected[job.circuit_id]
        out[job.pk] = DeadlineRow(standing_of(job.deadline, job.state, job.started_at, None, seconds, now),
                                  at_risk_from(job.deadline, job.started_at, seconds))
    return out


def missed_deadlines() -> dict[str, int]:
    """Jobs that finished after their deadline, by kind."""
    return dict(DEADLINES_MISSED.rows())


def host_rows() -> list[HostRow]:
    """Every host, by name."""
    return _HOSTS.rows()


def registered_names(circuit_ids: Iterable[str]) -> dict[str, str]:
    """The names of those of ``circuit_ids`` that are registered circuits (``circom/<sha256>``),
    by circuit id; a page that reads no Farm (capacity) names its circuits with it."""
    wanted = {circuit_id.removeprefix(CIRCOM): circuit_id for circuit_id in circuit_ids if circuit_id.startswith(CIRCOM)}
    if not wanted:
        return {}
    return {wanted[pk]: name for pk, name in Circuit.objects.filter(pk__in=wanted).values_list("pk", "name") if name}
