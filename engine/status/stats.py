"""Throughput and cost over a range, from the records: what the farm did and what it cost.

Per kind and per host, for the partitions that finished inside the range: proofs (jobs done)
and partitions per hour, the mean, p50 and p95 of each phase of their proving attempt
(engine.figures.PHASES: queue, reserve, synthesis, gpu, finalize), each host's device busy
over the range (engine.figures.DEVICE_BUSY), and the cost per proof: a host's cost per hour
(PROVINGSITE_HOST_COST_PER_HOUR, recorded when it starts) times the range, over the proofs it
finished; per kind, the farm's cost shared out by each kind's GPU time, over that kind's proofs.
``GET /api/v1/stats`` and /history/'s tables are this one read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Count, Q

from engine import figures
from engine.figures import PHASES, AttemptTimes, Span
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState
from engine.status.read import one_snapshot

PHASE_NAMES = tuple(f.name for f in PHASES)


class DonePartRow(NamedTuple):
    """A partition done in the range: its kind, host and its proving attempt's moments."""

    kind: str
    host: str | None
    submitted_at: datetime
    requeued_at: datetime | None
    claimed_at: datetime | None
    synth_started_at: datetime | None
    synth_finished_at: datetime | None
    gpu_started_at: datetime | None
    gpu_finished_at: datetime | None
    finished_at: datetime

    @property
    def times(self) -> AttemptTimes:
        return AttemptTimes(self.submitted_at, self.requeued_at, self.claimed_at, self.synth_started_at,
                            self.synth_finished_at, self.gpu_started_at, self.gpu_finished_at, self.finished_at)


class GpuSpanRow(NamedTuple):
    """A partition's GPU phase that touched the range, on a worker of a host."""

    host: str
    device: str
    kind: str
    gpu_started_at: datetime
    gpu_finished_at: datetime | None
    state: str
    finished_at: datetime | None

    def span(self, until: datetime) -> Span | None:
        return figures.gpu_span(self.gpu_started_at, self.gpu_finished_at, self.state == PartitionState.GPU,
                                self.finished_at, until)


class HostRow(NamedTuple):
    name: str
    cost_per_hour: float | None
    devices: tuple[str, ...]  # its workers' devices


class JobRunRow(NamedTuple):
    circuit_id: str
    host: str | None
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Range:
    """What the farm did in [since, until), read in one snapshot."""

    since: datetime
    until: datetime
    parts: tuple[DonePartRow, ...]
    jobs_by_kind: dict[str, int]
    jobs_by_host: dict[str, int]
    hosts: tuple[HostRow, ...]
    spans: tuple[GpuSpanRow, ...]
    runs: tuple[JobRunRow, ...]

    @property
    def hours(self) -> float:
        return max((self.until - self.since).total_seconds(), 1.0) / 3600


def read_range(since: datetime, until: datetime) -> Range:
    """The range's rows, in one snapshot (the caller's, if inside one)."""
    with one_snapshot():
        done = Partition.objects.filter(state=PartitionState.DONE, finished_at__gte=since, finished_at__lt=until)
        parts = tuple(DonePartRow._make(row) for row in done.values_list(
            "job__kind", "host__name", "job__submitted_at", "requeued_at", "claimed_at", "synth_started_at",
            "synth_finished_at", "gpu_started_at", "gpu_finished_at", "finished_at"))
        jobs = ProofJob.objects.filter(state=JobState.DONE, finished_at__gte=since, finished_at__lt=until)
        by_kind = dict(jobs.values("kind").annotate(n=Count("pk")).values_list("kind", "n"))
        by_host = dict(jobs.values("host__name").annotate(n=Count("pk")).values_list("host__name", "n"))
        devices: dict[str, set[str]] = defaultdict(set)
        for host, device in Worker.objects.values_list("host__name", "device"):
            devices[host].add(device)
        hosts = tuple(HostRow(name, cost, tuple(sorted(devices[name])))
                      for name, cost in EngineHost.objects.order_by("name").values_list("name", "cost_per_hour"))
        # Every GPU phase touching the range, whatever became of its partition: the device was busy.
        touching = (Partition.objects.filter(worker__isnull=False, gpu_started_at__lt=until)
                    .filter(Q(gpu_finished_at__gt=since) | Q(gpu_finished_at__isnull=True)))
        spans = tuple(GpuSpanRow._make(row) for row in touching.values_list(
            "worker__host__name", "worker__device", "job__kind", "gpu_started_at", "gpu_finished_at", "state",
            "finished_at"))
        runs = tuple(JobRunRow._make(row) for row in jobs.filter(started_at__isnull=False).values_list(
            "circuit_id", "host__name", "started_at", "finished_at"))
    return Range(since, until, parts, by_kind, by_host, hosts, spans, runs)


def phase_figures(rows: Iterable[DonePartRow]) -> dict[str, dict[str, float | None]]:
    """Each phase's mean, p50 and p95 in milliseconds (engine.figures' one definition of each)."""
    times = [row.times for row in rows]
    out: dict[str, dict[str, float | None]] = {}
    for figure in PHASES:
        values = [ms for t in times if (ms := t.ms(figure)) is not None]
        out[figure.name] = ({"mean_ms": sum(values) / len(values), "p50_ms": float(figures.p50(values)),
                             "p95_ms": float(figures.p95(values))} if values
                            else {"mean_ms": None, "p50_ms": None, "p95_ms": None})
    return out


def stats(since: datetime, until: datetime) -> dict[str, Any]:
    """The range's figures, read in one snapshot."""
    return figures_of(read_range(since, until))


def figures_of(rng: Range) -> dict[str, Any]:
    since, until, hours = rng.since, rng.until, rng.hours
    by_kind_parts: dict[str, list[DonePartRow]] = defaultdict(list)
    by_host_parts: dict[str, list[DonePartRow]] = defaultdict(list)
    for row in rng.parts:
        by_kind_parts[row.kind].append(row)
        by_host_parts[row.host or ""].append(row)
    gpu_s: dict[str, float] = defaultdict(float)  # by kind, inside the range
    by_device: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for span_row in rng.spans:
        span = span_row.span(until)
        if span is None:
            continue
        gpu_s[span_row.kind] += figures.busy_seconds([span], since, until)
        by_device[(span_row.host, span_row.device)].append(span)
    farm_cost = sum(float(host.cost_per_hour) * hours for host in rng.hosts if host.cost_per_hour)
    farm_gpu = sum(gpu_s.values()) or 1.0
    kinds = []
    for kind in sorted(set(by_kind_parts) | set(rng.jobs_by_kind)):
        proofs, parts = rng.jobs_by_kind.get(kind, 0), by_kind_parts[kind]
        share = farm_cost * gpu_s[kind] / farm_gpu
        kinds.append({"kind": kind, "proofs": proofs, "partitions": len(parts), "proofs_per_hour": proofs / hours,
                      "partitions_per_hour": len(parts) / hours, "phases": phase_figures(parts),
                      "cost_per_proof": share / proofs if proofs and farm_cost else None})
    hosts = []
    for host in rng.hosts:
        proofs, parts = rng.jobs_by_host.get(host.name, 0), by_host_parts[host.name]
        if not parts and not proofs:
            continue
        busy = figures.device_busy([by_device[(host.name, device)] for device in host.devices], since, until)
        cost = float(host.cost_per_hour) if host.cost_per_hour else None
        hosts.append({"host": host.name, "proofs": proofs, "partitions": len(parts), "proofs_per_hour": proofs / hours,
                      "partitions_per_hour": len(parts) / hours, "phases": phase_figures(parts),
                      "device_busy": busy, "cost_per_hour": cost,
                      "cost_per_proof": cost * hours / proofs if cost and proofs else None})
    return {"since": since, "until": until, "kinds": kinds, "hosts": hosts, "circuits": _durations(rng.runs)}


def _durations(runs: Sequence[JobRunRow]) -> list[dict[str, Any]]:
    """Per circuit (kind and scale, or a registered circuit), over every host ("host": null)
    and on each: the jobs done and the p50 and p95 of their run (engine.figures.JOB_RUN: the
    duration engine.ledger.deadlines expects of a circuit's next job)."""
    seconds: dict[tuple[str, str | None], list[float]] = defaultdict(list)
    for run in runs:
        took = figures.seconds_between(run.started_at, run.finished_at)
        if took is None:
            continue
        for key in ((run.circuit_id, None), (run.circuit_id, run.host)):
            seconds[key].append(took)
    return [{"circuit_id": circuit, "host": host, "jobs": len(values), "p50_s": figures.p50(values),
             "p95_s": figures.p95(values)}
            for (circuit, host), values in sorted(seconds.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]
