"""Throughput and cost over a range, from the records: what the farm did and what it cost.

Per kind and per host, for the partitions that finished inside the range: proofs (jobs done)
and partitions per hour, the mean, p50 and p95 of each phase (queue: submitted → claimed;
synthesis; GPU; finalize: GPU end → done), the device busy fraction (GPU time over the range
times the host's worker slots, as utilisation.py counts it), and the cost per proof: a
host's cost per hour (PROVINGSITE_HOST_COST_PER_HOUR, recorded when it starts) times the
range, over the proofs it finished; per kind, the farm's cost shared out by each kind's GPU
time, over that kind's proofs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count

from engine.format import ms_between
from engine.ledger.deadlines import p95, percentile
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState
from engine.status.read import one_snapshot
from engine.status.utilisation import busy_seconds, gpu_span

PHASE_NAMES = ("queue", "synthesis", "gpu", "finalize")


def _phases(rows: list[tuple[Any, ...]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for i, name in enumerate(PHASE_NAMES):
        values = [row[i] for row in rows if row[i] is not None]
        out[name] = ({"mean_ms": sum(values) / len(values), "p50_ms": float(percentile(values, 50)),
                      "p95_ms": float(p95(values))} if values
                     else {"mean_ms": None, "p50_ms": None, "p95_ms": None})
    return out


def stats(since: datetime, until: datetime) -> dict[str, Any]:
    """The range's figures, read in one snapshot."""
    hours = max((until - since).total_seconds(), 1.0) / 3600
    with one_snapshot():
        parts = list(Partition.objects.filter(state=PartitionState.DONE, finished_at__gte=since, finished_at__lt=until)
                     .values_list("job__kind", "host__name", "job__submitted_at", "claimed_at", "synth_started_at",
                                  "synth_finished_at", "gpu_started_at", "gpu_finished_at", "finished_at"))
        jobs = dict(ProofJob.objects.filter(state=JobState.DONE, finished_at__gte=since, finished_at__lt=until)
                    .values("kind").annotate(n=Count("pk")).values_list("kind", "n"))
        jobs_by_host = dict(ProofJob.objects.filter(state=JobState.DONE, finished_at__gte=since, finished_at__lt=until)
                            .values("host__name").annotate(n=Count("pk")).values_list("host__name", "n"))
        hosts = list(EngineHost.objects.annotate(slots=Count("workers")).values_list("name", "cost_per_hour", "slots"))
        spans = list(ProofJob.objects.filter(state=JobState.DONE, finished_at__gte=since, finished_at__lt=until,
                                             started_at__isnull=False)
                     .values_list("circuit_id", "host__name", "started_at", "finished_at"))
    timings: dict[tuple[str, str], list[tuple[int | None, ...]]] = defaultdict(list)
    gpu_s: dict[tuple[str, str], float] = defaultdict(float)
    for kind, host, submitted, claimed, s0, s1, g0, g1, done in parts:
        row = (ms_between(submitted, claimed), ms_between(s0, s1), ms_between(g0, g1), ms_between(g1, done))
        for key in (("kind", kind), ("host", host or "")):
            timings[key].append(row)
        span = gpu_span(g0, g1, PartitionState.DONE, done, until) if g0 else None
        if span is not None:
            seconds = busy_seconds([span], since, until)
            gpu_s[("kind", kind)] += seconds
            gpu_s[("host", host or "")] += seconds
    farm_cost = sum(float(cost) * hours for _, cost, _ in hosts if cost)
    farm_gpu = sum(v for (scope, _), v in gpu_s.items() if scope == "host") or 1.0
    by_kind = []
    for kind in sorted({k for (scope, k) in timings if scope == "kind"} | set(jobs)):
        proofs = jobs.get(kind, 0)
        share = farm_cost * gpu_s[("kind", kind)] / farm_gpu
        by_kind.append({"kind": kind, "proofs": proofs, "partitions": len(timings[("kind", kind)]),
                        "proofs_per_hour": proofs / hours, "partitions_per_hour": len(timings[("kind", kind)]) / hours,
                        "phases": _phases(timings[("kind", kind)]),
                        "cost_per_proof": share / proofs if proofs and farm_cost else None})
    by_host = []
    for name, cost, slots in hosts:
        proofs = jobs_by_host.get(name, 0)
        rows = timings[("host", name)]
        if not rows and not proofs:
            continue
        by_host.append({"host": name, "proofs": proofs, "partitions": len(rows), "proofs_per_hour": proofs / hours,
                        "partitions_per_hour": len(rows) / hours, "phases": _phases(rows),
                        "device_busy": gpu_s[("host", name)] / (hours * 3600 * slots) if slots else None,
                        "cost_per_hour": float(cost) if cost else None,
                        "cost_per_proof": float(cost) * hours / proofs if cost and proofs else None})
    return {"since": since, "until": until, "kinds": by_kind, "hosts": by_host, "circuits": _durations(spans)}


def _durations(spans: Sequence[tuple[str, str | None, datetime | None, datetime | None]]) -> list[dict[str, Any]]:
    """Per circuit (kind and scale, or a registered circuit), over every host ("host": null)
    and on each: the jobs done and the p50 and p95 of their duration, first claim → done (the
    duration engine.ledger.deadlines expects of a circuit's next job)."""
    seconds: dict[tuple[str, str | None], list[float]] = defaultdict(list)
    for circuit, host, started, done in spans:
        if started is None or done is None:
            continue
        for key in ((circuit, None), (circuit, host)):
            seconds[key].append((done - started).total_seconds())
    return [{"circuit_id": circuit, "host": host, "jobs": len(values), "p50_s": percentile(values, 50),
             "p95_s": p95(values)}
            for (circuit, host), values in sorted(seconds.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]
