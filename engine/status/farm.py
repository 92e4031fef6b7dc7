"""The farm's status as one JSON-ready dict, read only from the records.

``farm_snapshot()`` is what ``/status`` serves (its shape is pinned by
``engine/api/status.schema.json``) and what ``/metrics`` reads. The top level carries every
field of the seed system's status (uptime_secs, memory, synthesis, pipelines, gpu_workers,
allocations, counters) summed over the live hosts, so a client written for the seed keeps
working; ``hosts`` repeats those fields per host, plus heartbeat age, staleness and GPU memory.

Nothing here trusts an in-memory flag: a worker is "proving" exactly when a partition in
``gpu`` names it. The document is a projection of one ``Farm`` (engine.status.read_model),
read with the status clocks in one database snapshot, so ``version`` names exactly what was
read; ``/metrics`` projects the same ``Farm``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings

from engine.figures import ms_between
from engine.format import iso_moment
from engine.states import JobState, PartitionState
from engine.status.holdings import Holdings, device_reserved
from engine.status.host_report import DeviceReport, HostFigures, devices_of
from engine.status.read_model import Farm, live_farm
from engine.status.records import DeadlineRow, HostRow

P = PartitionState

def stale_after_seconds() -> float:
    """A host is stale once three heartbeats are missed, or its lease lapsed if sooner: by
    then its partitions are about to be requeued (the console uses the same rule)."""
    knobs = settings.PROVINGSITE
    return min(3 * float(knobs["HEARTBEAT_SECONDS"]), float(knobs["LEASE_SECONDS"]))


def _secs(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


# ---- pieces --------------------------------------------------------------------------


def _memory(budget: int, physical: int, by_owner: dict[str, int]) -> dict[str, Any]:
    # As in the seed, total is the budget the memory manager hands out, not the machine's RAM.
    used = sum(by_owner.values())
    return {
        "total_bytes": budget,
        "used_bytes": used,
        "available_bytes": max(0, budget - used),
        "budget_bytes": budget,
        "physical_bytes": physical,
        "by_owner": dict(sorted(by_owner.items())),
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


def _figures(figures: HostFigures) -> dict[str, Any]:
    """What the machine measured at its last heartbeat; null figures until measured, and no
    devices where NVML is absent (``nvml`` false), rather than zeros."""
    return {
        "sampled_at": iso_moment(figures.sampled_at),
        "cpu_percent": figures.cpu_percent,
        "cpu_count": figures.cpu_count,
        "memory_used_bytes": figures.memory_used_bytes,
        "memory_total_bytes": figures.memory_total_bytes,
        "engine_rss_bytes": figures.engine_rss_bytes,
        "nvml": figures.nvml,
        "devices": [{"device": d.device, "utilisation_percent": d.utilisation_percent,
                     "memory_used_bytes": d.memory_used_bytes, "memory_total_bytes": d.memory_total_bytes,
                     "power_watts": d.power_watts} for d in figures.devices],
        # The engine's threads backing off after a database error at the last heartbeat
        # (engine.pipeline.supervise); a thread that died ends its process instead.
        "threads_down": [{"thread": t.thread, "since": t.since.isoformat() if t.since else None, "error": t.error}
                         for t in figures.threads_down],
    }


def _allocations(hosts: Iterable[HostRow], held: Mapping[int, Holdings],
                 now: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    srs = [{
        "host": host.name,
        "circuit_id": key.circuit_id,
        "bytes": key.bytes,
        # In use is derived from the claims in this snapshot; the last use is the engine's record.
        "last_used_secs_ago": 0.0 if key.users else (_secs(key.last_used_at, now) if now else None),
        "in_use": key.users,
        "evictable": key.evictable,
        "tier": key.tier,
        "mapped_bytes": key.mapped_bytes,
        "load_secs": key.load_seconds,
    } for host in hosts for key in held[host.pk].keys]
    # Proving keys are each circuit's SRS; the seed's pre-compiled circuits ("pce") have no
    # counterpart here, and the list stays for clients written against the seed's schema.
    return {"srs": srs, "pce": []}


def _pipelines(farm: Farm) -> list[dict[str, Any]]:
    now = farm.now
    synthesizing, gpu, done = PartitionState.SYNTHESIZING, PartitionState.GPU, PartitionState.DONE
    rows = []
    for job in farm.jobs:
        parts = farm.parts_by_job.get(job.pk, ())
        cells = []
        for p in parts:
            # A phase under way reports its time so far; a finished one its final figure
            # (engine.figures: synthesis is synth_ms, gpu is gpu_ms).
            state, worker = p.state, p.worker
            synth_end = p.synth_finished_at or (now if state == synthesizing else None)
            gpu_end = p.gpu_finished_at or (now if state == gpu else None)
            cells.append({
                "index": p.number,
                "state": state,
                "synth_ms": ms_between(p.synth_started_at, synth_end),
                "gpu_ms": ms_between(p.gpu_started_at, gpu_end),
                "host": p.host,
                "worker": f"W{worker}" if worker is not None else None,
                "attempt": p.attempt,
                "batch": p.batch or None,  # the proving batch it went onto the GPU with (its first member's id)
            })
        rows.append({
            "job_id": job.job_id,
            "proof_kind": job.kind,
            "state": job.state,
            "priority": job.priority,
            "started_secs_ago": _secs(job.started_at or job.submitted_at, now) or 0.0,
            "total_partitions": job.num_partitions or len(parts),
            "partitions_done": sum(p.state == done for p in parts),
            "partitions": cells,
            "hosts": sorted({p.host for p in parts if p.host}),
            **_deadline(farm.deadlines.get(job.pk)),
        })
    return rows


def _deadline(row: DeadlineRow | None) -> dict[str, Any]:
    """A job against its deadline now (engine.ledger.deadlines): slack in seconds, negative
    when its expected finish passes the deadline; null, and both flags false, without one."""
    if row is None:
        return {"deadline": None, "slack_secs": None, "at_risk": False, "late": False}
    now = row.standing
    return {"deadline": iso_moment(now.deadline),
            "slack_secs": None if now.slack_s is None else round(now.slack_s, 3), "at_risk": now.at_risk, "late": now.late}


def _gpu_ordinal(device: str) -> int | None:
    head, _, tail = device.partition(":")
    return int(tail) if head == "cuda" and tail.isdigit() else None


def _workers(farm: Farm) -> list[dict[str, Any]]:
    rows = []
    for worker in farm.workers:
        parts = farm.on_gpu_by_worker.get(worker.pk)
        current = parts[0] if parts else None
        busy_now = _secs(current.gpu_started_at, farm.now) if current else None
        share = farm.utilisation_of(worker)
        rows.append({
            "worker_id": f"{worker.host}/{worker.device}/W{worker.ordinal}",
            "host": worker.host,
            "label": f"W{worker.ordinal}",
            "ordinal": worker.ordinal,
            "device": worker.device,
            "gpu_ordinal": _gpu_ordinal(worker.device),
            "state": "proving" if current else "idle",
            "current_job": current.job_id if current else None,
            "current_kind": current.kind if current else None,
            "current_partition": current.number if current else None,
            # a batch (engine.pipeline.prove) has several partitions on the GPU with this worker
            "current_partitions": [[p.job_id, p.number] for p in parts] if parts else [],
            "current_batch": (current.batch or None) if current else None,
            "busy_secs": busy_now or 0.0,
            "utilisation": round(share, 4),
        })
    return rows


def _counters(by_kind_state: dict[str, dict[str, int]], pending: int, reserving: int) -> dict[str, Any]:
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
        "pending_partitions": pending,
        "reserving_partitions": reserving,
    }


def _counts(farm: Farm) -> dict[int | None, dict[str, dict[str, int]]]:
    """Jobs by host, kind and state: one grouped read, split here for the farm and every host."""
    jobs: dict[int | None, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for row in farm.job_counts:
        jobs[row.host][row.kind][row.state] = row.n
    return jobs


def _farm_counts(jobs: dict[int | None, dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    total: dict[str, dict[str, int]] = defaultdict(dict)
    for by_kind in jobs.values():
        for kind, states in by_kind.items():
            for state, n in states.items():
                total[kind][state] = total[kind].get(state, 0) + n
    return total


# ---- the whole picture ---------------------------------------------------------------


def status_document(farm: Farm) -> dict[str, Any]:
    """``/status``'s body (without version and consistency): a projection of ``farm``."""
    now, stale_s = farm.now, stale_after_seconds()
    hosts, live = farm.hosts, farm.live_hosts
    pipelines = _pipelines(farm)
    # Memory, keys and synthesis are derived from the partition rows in this snapshot, never
    # from a host's own counters.
    held = farm.held
    gpu_workers = _workers(farm)
    job_counts, pending = _counts(farm), farm.pending_by_host

    per_host = []
    for host in hosts:
        age = _secs(host.heartbeat_at, now)
        stopped = host.stopped_at is not None
        per_host.append({
            "name": host.name,
            "backend": host.backend,
            "stopped": stopped,
            "started_at": iso_moment(host.started_at),
            "heartbeat_age_secs": age,
            "stale": not stopped and (age is None or age > stale_s),
            "uptime_secs": 0.0 if stopped else (_secs(host.started_at, now) or 0.0),
            "memory": _memory(held[host.pk].budget, held[host.pk].physical, held[host.pk].by_owner),
            "synthesis": {"max_concurrent": host.synthesis_max, "active": held[host.pk].count(P.SYNTHESIZING)},
            "devices": [_device(d, host.backend) for d in devices_of(host.devices)],
            "device_memory": device_reserved(host.device_reserved),
            "figures": _figures(HostFigures.from_json(host.figures)),
            "pipelines": [p for p in pipelines if host.name in p["hosts"]],
            "gpu_workers": [w for w in gpu_workers if w["host"] == host.name],
            "allocations": _allocations([host], held, now),
            "counters": _counters(job_counts.get(host.pk, {}), pending.get(host.pk, 0), held[host.pk].count(P.RESERVING)),
            "refused_keys": dict(host.refused_keys or {}),
        })

    by_owner: dict[str, int] = defaultdict(int)
    for host in live:
        for owner, size in held[host.pk].by_owner.items():
            by_owner[owner] += size
    return {
        "generated_at": iso_moment(now),
        "stale_after_secs": stale_s,
        "uptime_secs": max((_secs(h.started_at, now) or 0.0 for h in live), default=0.0),
        "memory": _memory(sum(h.memory_budget_bytes for h in live), sum(h.memory_total_bytes for h in live),
                          dict(by_owner)),
        "synthesis": {"max_concurrent": sum(h.synthesis_max for h in live),
                      "active": sum(held[h.pk].count(P.SYNTHESIZING) for h in live)},
        "pipelines": pipelines,
        "gpu_workers": gpu_workers,
        "allocations": _allocations(live, held, now),
        "counters": _counters(_farm_counts(job_counts), sum(pending.values()),
                              sum(held[h.pk].count(P.RESERVING) for h in hosts)),
        "hosts": per_host,
    }


def farm_document(farm: Farm) -> dict[str, Any]:
    return {"version": farm.version, "consistent": farm.exact, **status_document(farm)}


def farm_snapshot() -> dict[str, Any]:
    """The status of every host, read in one snapshot at one status version."""
    with live_farm() as farm:
        return farm_document(farm)
