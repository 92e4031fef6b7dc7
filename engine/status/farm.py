"""The farm's status as one JSON-ready dict, read only from the records.

``farm_snapshot()`` is what ``/status`` serves (its shape is pinned by
``engine/api/status.schema.json``) and what ``/metrics`` reads. The top level carries every
field of the seed system's status (uptime_secs, memory, synthesis, pipelines, gpu_workers,
allocations, counters) summed over the live hosts, so a client written for the seed keeps
working; ``hosts`` repeats those fields per host, plus heartbeat age, staleness and GPU memory.

Nothing here trusts an in-memory flag: a worker is "proving" exactly when a partition in
``gpu`` names it. The whole read, the status clock included, runs in one database snapshot
(``engine.status.read.one_snapshot``), so ``version`` names exactly what was read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from engine.format import ms_between
from engine.models import EngineHost, Partition, ProofJob, StatusClock, Worker
from engine.states import JOB_ACTIVE, JobState, PartitionState
from engine.status.host_report import DeviceReport, KeyReport, devices_of, keys_of
from engine.status.read import one_snapshot

# Worker utilisation is measured over the same window the console's task stream shows.
UTILISATION_WINDOW_SECONDS = 300


def stale_after_seconds() -> float:
    """A host is stale once three heartbeats are missed, or its lease lapsed if sooner: by
    then its partitions are about to be requeued (the console uses the same rule)."""
    knobs = settings.PROVINGSITE
    return min(3 * float(knobs["HEARTBEAT_SECONDS"]), float(knobs["LEASE_SECONDS"]))


def _secs(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _current_version() -> int:
    return int(StatusClock.objects.order_by("pk").values_list("value", flat=True).first() or 0)


# ---- pieces --------------------------------------------------------------------------


def _memory(budget: int, used: int, physical: int, by_owner: dict[str, Any]) -> dict[str, Any]:
    # As in the seed, total is the budget the memory manager hands out, not the machine's RAM.
    return {
        "total_bytes": budget,
        "used_bytes": used,
        "available_bytes": max(0, budget - used),
        "budget_bytes": budget,
        "physical_bytes": physical,
        "by_owner": {str(k): _int(v) for k, v in sorted(by_owner.items())},
    }


def _device(report: DeviceReport, backend: str) -> dict[str, Any]:
    total = report.memory_total_bytes or 0
    return {
        "device": "cpu" if backend == "cpu" and report.device == "?" else report.device,
        "name": report.label,
        "total_bytes": total,
        "free_bytes": report.memory_free_bytes,
        "used_bytes": report.memory_used_bytes,
        "pool_bytes": report.pool_used_bytes,
    }


def _last_used_secs_ago(key: KeyReport, written_at: datetime | None, now: datetime) -> float | None:
    """Age of a key's last use: the engine records it relative to when it wrote the row, so
    the time since that write is added."""
    if key.last_used_secs_ago is None:
        return None
    extra = (now - written_at).total_seconds() if written_at else 0.0
    return round(key.last_used_secs_ago + max(0.0, extra), 1)


def keys_on_gpu() -> set[tuple[int, str]]:
    """(host, circuit) of every partition whose proof is using its key (gpu or finalizing)."""
    return set(Partition.objects.filter(state__in=(PartitionState.GPU, PartitionState.FINALIZING),
                                        host__isnull=False).values_list("host_id", "job__circuit_id").distinct())


def _allocations(hosts: Iterable[EngineHost], now: datetime,
                 on_gpu: set[tuple[int, str]]) -> dict[str, list[dict[str, Any]]]:
    srs: list[dict[str, Any]] = []
    for host in hosts:
        for key in keys_of(host.key_cache):
            # A key whose circuit is proving in this snapshot is in use, whatever the heartbeat said.
            in_use = max(key.in_use, int((host.pk, key.circuit_id) in on_gpu))
            srs.append({
                "host": host.name,
                "circuit_id": key.circuit_id,
                "bytes": key.bytes,
                "last_used_secs_ago": _last_used_secs_ago(key, host.heartbeat_at, now),
                "in_use": in_use,
                "evictable": key.evictable and in_use == 0,
            })
    # Proving keys are each circuit's SRS; the seed's pre-compiled circuits ("pce") have no
    # counterpart here, and the list stays for clients written against the seed's schema.
    return {"srs": srs, "pce": []}


# Partition columns /status shows, read as plain rows: model instances were most of a read's cost.
_PART_COLUMNS = ("job_id", "index", "state", "synth_started_at", "synth_finished_at", "gpu_started_at",
                 "gpu_finished_at", "host__name", "worker__ordinal", "attempt")
_JOB_COLUMNS = ("pk", "job_id", "kind", "state", "priority", "started_at", "submitted_at", "num_partitions")


def _partition_row(part: dict[str, Any], now: datetime) -> dict[str, Any]:
    # A phase under way reports its time so far; a finished one its final figure.
    synth_end = part["synth_finished_at"] or (now if part["state"] == PartitionState.SYNTHESIZING else None)
    gpu_end = part["gpu_finished_at"] or (now if part["state"] == PartitionState.GPU else None)
    ordinal = part["worker__ordinal"]
    return {
        "index": part["index"],
        "state": part["state"],
        "synth_ms": ms_between(part["synth_started_at"], synth_end),
        "gpu_ms": ms_between(part["gpu_started_at"], gpu_end),
        "host": part["host__name"],
        "worker": f"W{ordinal}" if ordinal is not None else None,
        "attempt": part["attempt"],
    }


def _pipelines(now: datetime) -> list[dict[str, Any]]:
    jobs = list(ProofJob.objects.filter(state__in=JOB_ACTIVE).order_by("priority", "submitted_at", "pk")
                .values(*_JOB_COLUMNS))
    by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for part in (Partition.objects.filter(job__state__in=JOB_ACTIVE).order_by("job_id", "index")
                 .values(*_PART_COLUMNS)):
        by_job[part["job_id"]].append(part)
    rows = []
    for job in jobs:
        parts = by_job.get(job["pk"], [])
        since = job["started_at"] or job["submitted_at"]
        rows.append({
            "job_id": job["job_id"],
            "proof_kind": job["kind"],
            "state": job["state"],
            "priority": job["priority"],
            "started_secs_ago": _secs(since, now) or 0.0,
            "total_partitions": job["num_partitions"] or len(parts),
            "partitions_done": sum(p["state"] == PartitionState.DONE for p in parts),
            "partitions": [_partition_row(p, now) for p in parts],
            "hosts": sorted({p["host__name"] for p in parts if p["host__name"]}),
        })
    return rows


def _gpu_ordinal(device: str) -> int | None:
    head, _, tail = device.partition(":")
    return int(tail) if head == "cuda" and tail.isdigit() else None


def _workers(workers: list[Worker], now: datetime) -> list[dict[str, Any]]:
    window_start = now - timedelta(seconds=UTILISATION_WINDOW_SECONDS)
    on_gpu: dict[int, list[Partition]] = defaultdict(list)
    spans: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    ids = [w.pk for w in workers]
    # Derived state: the partitions in `gpu` that name the worker, nothing else.
    for part in (Partition.objects.filter(worker_id__in=ids, state=PartitionState.GPU)
                 .select_related("job").order_by("gpu_started_at", "pk")):
        on_gpu[part.worker_id].append(part)
        if part.gpu_started_at:  # time spent so far on the GPU counts towards utilisation too
            spans[part.worker_id].append((part.gpu_started_at, now))
    for start, end, worker_id in (Partition.objects.filter(worker_id__in=ids, gpu_started_at__isnull=False,
                                                           gpu_finished_at__gte=window_start)
                                  .values_list("gpu_started_at", "gpu_finished_at", "worker_id")):
        spans[worker_id].append((start, end))
    rows = []
    for worker in workers:
        parts = on_gpu.get(worker.pk, [])
        current = parts[0] if parts else None
        busy_now = _secs(current.gpu_started_at, now) if current else None
        # Busy time and the time observed start together: work from before the host's restart
        # is not divided by the uptime since it.
        up_since = max(worker.host.started_at or window_start, window_start)
        observed = max((now - up_since).total_seconds(), 1e-9)
        busy = sum(max(0.0, (end - max(start, up_since)).total_seconds()) for start, end in spans[worker.pk])
        rows.append({
            "worker_id": f"{worker.host.name}/{worker.device}/{worker.label}",
            "host": worker.host.name,
            "label": worker.label,
            "ordinal": worker.ordinal,
            "device": worker.device,
            "gpu_ordinal": _gpu_ordinal(worker.device),
            "state": "proving" if current else "idle",
            "current_job": current.job.job_id if current else None,
            "current_kind": current.job.kind if current else None,
            "current_partition": current.index if current else None,
            "busy_secs": busy_now or 0.0,
            "utilisation": round(min(1.0, busy / observed), 4),
        })
    return rows


def _counters(job_filter: dict[str, Any]) -> dict[str, Any]:
    by_kind_state: dict[str, dict[str, int]] = defaultdict(dict)
    for row in ProofJob.objects.filter(**job_filter).values("kind", "state").annotate(n=Count("pk")):
        by_kind_state[row["kind"]][row["state"]] = row["n"]

    def by_kind(state: str) -> dict[str, int]:
        return {kind: states[state] for kind, states in sorted(by_kind_state.items()) if states.get(state)}

    completed, failed = by_kind(JobState.DONE), by_kind(JobState.FAILED)
    by_state = {s: sum(st.get(s, 0) for st in by_kind_state.values()) for s in JobState.values}
    return {
        "total_completed": sum(completed.values()),
        "total_failed": sum(failed.values()),
        "completed_by_kind": completed,
        "failed_by_kind": failed,
        "queue_depth": by_state[JobState.QUEUED],
        "by_state": by_state,
        "pending_partitions": Partition.objects.filter(
            state=PartitionState.PENDING, job__state__in=JOB_ACTIVE,
            **{f"job__{k}": v for k, v in job_filter.items()}).count(),
    }


# ---- the whole picture ---------------------------------------------------------------


def _read(now: datetime) -> dict[str, Any]:
    stale_s = stale_after_seconds()
    hosts = list(EngineHost.objects.order_by("name"))
    live = [h for h in hosts if h.stopped_at is None]
    workers = list(Worker.objects.select_related("host").filter(host__stopped_at__isnull=True)
                   .order_by("host__name", "device", "ordinal"))
    pipelines = _pipelines(now)
    on_gpu = keys_on_gpu()
    # Counted from the partition rows in this snapshot, never from a host's own counter.
    synthesizing = dict(Partition.objects.filter(state=PartitionState.SYNTHESIZING).values("host_id")
                        .annotate(n=Count("pk")).values_list("host_id", "n"))
    gpu_workers = _workers(workers, now)

    host_rows = []
    for host in hosts:
        age = _secs(host.heartbeat_at, now)
        stopped = host.stopped_at is not None
        host_rows.append({
            "name": host.name,
            "backend": host.backend,
            "stopped": stopped,
            "started_at": host.started_at.isoformat() if host.started_at else None,
            "heartbeat_age_secs": age,
            "stale": not stopped and (age is None or age > stale_s),
            "uptime_secs": 0.0 if stopped else (_secs(host.started_at, now) or 0.0),
            "memory": _memory(host.memory_budget_bytes, host.memory_used_bytes, host.memory_total_bytes,
                              host.memory_by_owner or {}),
            "synthesis": {"max_concurrent": host.synthesis_max, "active": synthesizing.get(host.pk, 0)},
            "devices": [_device(d, host.backend) for d in devices_of(host.devices)],
            "pipelines": [p for p in pipelines if host.name in p["hosts"]],
            "gpu_workers": [w for w in gpu_workers if w["host"] == host.name],
            "allocations": _allocations([host], now, on_gpu),
            "counters": _counters({"host": host}),
        })

    by_owner: dict[str, int] = defaultdict(int)
    for host in live:
        for owner, size in (host.memory_by_owner or {}).items():
            by_owner[str(owner)] += _int(size)
    return {
        "generated_at": now.isoformat(),
        "stale_after_secs": stale_s,
        "uptime_secs": max((_secs(h.started_at, now) or 0.0 for h in live), default=0.0),
        "memory": _memory(sum(h.memory_budget_bytes for h in live), sum(h.memory_used_bytes for h in live),
                          sum(h.memory_total_bytes for h in live), by_owner),
        "synthesis": {"max_concurrent": sum(h.synthesis_max for h in live),
                      "active": sum(synthesizing.get(h.pk, 0) for h in live)},
        "pipelines": pipelines,
        "gpu_workers": gpu_workers,
        "allocations": _allocations(live, now, on_gpu),
        "counters": _counters({}),
        "hosts": host_rows,
    }


def farm_snapshot() -> dict[str, Any]:
    """The status of every host, read in one snapshot at one status version."""
    with one_snapshot() as snap:
        version = _current_version()
        body = _read(timezone.now())
    return {"version": version, "consistent": snap.exact, **body}
