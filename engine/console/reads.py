"""The console's panels as projections of the farm: one function per fragment, from the pass's
``Farm`` (engine.status.read_model, read in the render pass's one snapshot) to a context.

None of them reads the database: ``/status``, ``/metrics`` and every panel are projections of
the same ``Farm``, so no two can disagree. A job's own page reads that job's rows (finished
jobs included) in the same snapshot as the pass's ``Farm``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from engine.console.style import CIRCOM, circuit_label, level, owner_colour
from engine.console.units import digest
from engine.format import epoch_ms, fmt_bytes, fmt_ms, ms_between
from engine.ledger.deadlines import expected_seconds
from engine.ledger.job_log import KEEP as LOG_LINES
from engine.ledger.placement import shared_key
from engine.models import JobLogLine, ProofJob
from engine.states import JOB_ACTIVE, JobState, PartitionState
from engine.status import utilisation
from engine.status.farm import stale_after_seconds
from engine.status.holdings import KEY_OWNER_PREFIX, holder_of, key_sizes
from engine.status.host_report import HostFigures, devices_of
from engine.status.read_model import Farm
from engine.status.residency import key_residency

TASK_STREAM_SECONDS = utilisation.WINDOW_SECONDS
# The task stream's geometry moves with the clock alone; it is resent when a bar starts or
# ends, and otherwise once per step of this many seconds.
TASK_STREAM_STEP_S = 5

def hosts_context(farm: Farm) -> dict[str, Any]:
    now, stale_s = farm.now, stale_after_seconds()
    rows = []
    for host in farm.hosts:
        age = (now - host.heartbeat_at).total_seconds() if host.heartbeat_at else None
        rows.append({
            "host": host,
            "stopped": host.stopped_at is not None,
            "stale": host.stopped_at is None and (age is None or age > stale_s),
            "heartbeat_age": fmt_ms(age * 1000 if age is not None else None),
            "heartbeat_ms": epoch_ms(host.heartbeat_at),
            "uptime": fmt_ms(ms_between(host.started_at, now)),
            "started_ms": epoch_ms(host.started_at),
            "figures": figures_context(HostFigures.from_json(host.figures)),
        })
    return {"hosts": rows, "stale_after_ms": int(stale_s * 1000)}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}%"


def figures_context(figures: HostFigures) -> dict[str, Any] | None:
    """A host's measured figures as its card words them; None before its first sample. A
    device NVML did not measure is left out (no zeros for a GPU nobody measured)."""
    if not figures.measured:
        return None
    ram = (f"{fmt_bytes(figures.memory_used_bytes)} / {fmt_bytes(figures.memory_total_bytes)}"
           if figures.memory_used_bytes is not None and figures.memory_total_bytes else "—")
    ram_fraction = (figures.memory_used_bytes / figures.memory_total_bytes
                    if figures.memory_used_bytes is not None and figures.memory_total_bytes else 0.0)
    devices = [{
        "name": d.device, "utilisation": _pct(d.utilisation_percent),
        "memory": (f"{fmt_bytes(d.memory_used_bytes)} / {fmt_bytes(d.memory_total_bytes)}"
                   if d.memory_used_bytes is not None and d.memory_total_bytes else "—"),
        "power": "—" if d.power_watts is None else f"{d.power_watts:.0f} W",
    } for d in figures.devices]
    return {"cpu": _pct(figures.cpu_percent), "cpu_count": figures.cpu_count,
            "cpu_level": level((figures.cpu_percent or 0.0) / 100), "ram": ram, "ram_level": level(ram_fraction),
            "engine_rss": fmt_bytes(figures.engine_rss_bytes) if figures.engine_rss_bytes is not None else "—",
            "nvml": figures.nvml, "devices": devices}


# How much of an owner's name a memory legend row shows (console.css: .memory .legend .owner's
# max-width); a longer one, or one shown by another name, carries its whole name in a title.
LEGEND_CHARS = 28


def names_of(farm: Farm, circuit_ids: Iterable[str]) -> Mapping[str, str]:
    """The registered circuits' names, read from the farm only where one of ``circuit_ids`` is a
    registered circuit's (most passes name none, and need not read them)."""
    return farm.circuit_names if any(CIRCOM in circuit_id for circuit_id in circuit_ids) else {}


def owner_label(owner: str, names: Mapping[str, str]) -> str:
    """A memory owner as the legend names it: a key or a load by its circuit's name."""
    for prefix in (KEY_OWNER_PREFIX, f"loading {KEY_OWNER_PREFIX}", "compiled "):
        if owner.startswith(prefix):
            circuit, _, rest = owner[len(prefix):].partition(" ")
            return f"{prefix}{circuit_label(circuit, names)}{' ' + rest if rest else ''}"
    return owner


def memory_context(farm: Farm) -> dict[str, Any]:
    hosts = []
    farm_used = farm_budget = 0
    held = farm.held
    names = names_of(farm, (owner for host in farm.live_hosts for owner in held[host.pk].by_owner))
    for host in farm.live_hosts:
        budget, owned = held[host.pk].budget, held[host.pk].by_owner
        used = sum(owned.values())
        farm_used += used
        farm_budget += budget
        segments = [{
            "owner": owner, "label": owner_label(owner, names), "bytes": fmt_bytes(size),
            "cut": len(owner_label(owner, names)) > LEGEND_CHARS or owner_label(owner, names) != owner,
            "colour": owner_colour(owner, holder_of(owner)), "pct": 100.0 * size / budget if budget else 0.0,
            "holder": holder_of(owner),
        } for owner, size in sorted(owned.items(), key=lambda item: (-item[1], item[0]))]
        fraction = used / budget if budget else 0.0
        hosts.append({"host": host, "used": fmt_bytes(used), "used_bytes": used, "budget": fmt_bytes(budget),
                      "pct": round(100 * fraction, 1), "level": level(fraction), "segments": segments})
    fraction = farm_used / farm_budget if farm_budget else 0.0
    return {"hosts": hosts, "farm": {"used": fmt_bytes(farm_used), "budget": fmt_bytes(farm_budget),
                                     "pct": round(100 * fraction, 1), "level": level(fraction)}}


def devices_context(farm: Farm) -> dict[str, Any]:
    devices = []
    for host in farm.live_hosts:
        for report in devices_of(host.devices):
            total = report.memory_total_bytes
            if not total:  # the CPU backend's slot has no device memory to show
                continue
            used = report.memory_used_bytes
            fraction = used / total if used is not None else 0.0
            devices.append({
                "host": host.name, "name": report.device, "label": report.label,
                "total": fmt_bytes(total), "used": fmt_bytes(used) if used is not None else "—",
                "pool": fmt_bytes(report.pool_used_bytes) if report.pool_used_bytes is not None else "—",
                "pct": round(100 * fraction, 1), "level": level(fraction),
            })
    return {"devices": devices}


def counters_context(farm: Farm) -> dict[str, Any]:
    table: dict[str, dict[str, int]] = {}
    for row in farm.job_counts:  # summed over the hosts
        table.setdefault(row.kind, {})[row.state] = table.get(row.kind, {}).get(row.state, 0) + row.n
    states = [JobState.QUEUED, JobState.RUNNING, JobState.DONE, JobState.FAILED, JobState.CANCELLED]
    rows: list[dict[str, Any]] = [{"kind": kind, "cells": [(str(s), by_state.get(s, 0)) for s in states]}
                                  for kind, by_state in sorted(table.items())]
    totals = [(str(s), sum(r["cells"][i][1] for r in rows)) for i, s in enumerate(states)]
    pending = farm.unclaimed
    return {"states": [str(s) for s in states], "rows": rows, "totals": totals,
            "queue_depth": table and sum(by.get(JobState.QUEUED, 0) for by in table.values()) or 0,
            "pending_partitions": pending}


# What a key chip offers, by the key's tier: the other tiers it can be moved to.
KEY_ACTIONS = {"hot": [("evict", "warm"), ("evict", "cold")],
               "warm": [("preload", "hot"), ("evict", "cold")],
               "cold": [("preload", "hot"), ("preload", "warm")]}


def keys_context(farm: Farm) -> dict[str, Any]:
    """Each live host's keys: those it holds (hot, warm), then those it could preload but holds
    cold: the shared keys of the active jobs and the farm's known keys (FarmKey), less what it
    refuses and what its claimed partitions are loading now (that key is on its way in)."""
    # A key is in use while a claimed partition of its circuit is on its host, in this snapshot.
    held = farm.held
    loading: dict[int, set[str]] = {}
    for row in farm.claimed:
        loading.setdefault(row.host, set()).add(row.circuit_id or row.kind)
    sizes = key_sizes(farm.live_hosts)  # a cold key's size where another host holds it
    preloadable = _preloadable(farm)
    names = names_of(farm, [*preloadable, *(key.circuit_id for host in farm.live_hosts for key in held[host.pk].keys)])
    chips = []
    for host in farm.live_hosts:
        keys = held[host.pk].keys
        chips += [{"host": host.name, "circuit": key.circuit_id, "label": circuit_label(key.circuit_id, names),
                   "size": fmt_bytes(key.bytes), "users": key.users,
                   "state": "in use" if key.users else "evictable", "tier": key.tier,
                   "mapped": fmt_bytes(key.mapped_bytes) if key.tier == "warm" else "",
                   "actions": KEY_ACTIONS.get(key.tier, [])} for key in keys]
        busy = loading.get(host.pk, set())
        skip = {key.circuit_id for key in keys} | set(host.refused_keys or {})
        chips += [{"host": host.name, "circuit": circuit, "label": circuit_label(circuit, names),
                   "size": fmt_bytes(sizes[circuit]) if circuit in sizes else "—",
                   "users": 0, "state": "cold", "tier": "cold", "mapped": "", "actions": KEY_ACTIONS["cold"]}
                  for circuit in preloadable
                  if circuit not in skip and circuit not in busy and circuit.split("/", 1)[0] not in busy]
    return {"chips": chips}


def _preloadable(farm: Farm) -> list[str]:
    """Keys an operator can ask a host to preload: shared ones (an uploaded zkey is its job's
    alone) of the active jobs and of the farm's record, by circuit id."""
    found = {shared_key(job.kind, job.circuit_id) for job in farm.jobs}
    found |= {shared_key(circuit_id.split("/", 1)[0], circuit_id) for circuit_id in farm.farm_keys}
    return sorted(found - {""})


def failures_context(farm: Farm) -> dict[str, Any]:
    jobs = [row._asdict() for row in farm.failed_jobs]
    parts = [{"index": row.number, "job_id": row.job_id, "attempt": row.attempt, "error": row.error}
             for row in farm.failed_parts]
    return {"jobs": jobs, "parts": parts}


# ---- what a pass reads, and what it yields ------------------------------------------------


def pipelines_context(farm: Farm, jobs_wanted: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
    """Which jobs are active (the panel's shape), and the rows of the wanted ones: every row
    when the shape moved since the caller's last pass."""
    jobs = farm.jobs
    shape = digest(repr([(job.pk, job.job_id) for job in jobs]))
    everything = jobs_wanted is None or known.get("pipelines") != shape
    chosen = jobs if everything or jobs_wanted is None else tuple(job for job in jobs if job.job_id in jobs_wanted)
    parts = farm.parts_by_job if everything else farm.parts_of([job.pk for job in chosen])
    # Against their deadlines as /status reads them (one rule: engine.ledger.deadlines).
    return {"jobs": jobs, "shape": shape, "everything": everything, "chosen": chosen, "parts": parts,
            "deadlines": farm.deadlines, "circuit_names": names_of(farm, (job.circuit_id for job in chosen))}



def workers_context(farm: Farm, jobs_wanted: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
    # A worker's card is derived from the partitions on the GPU; there is no busy flag.
    return {"workers": farm.workers, "proving": farm.on_gpu_by_worker}



def taskstream_context(farm: Farm, jobs_wanted: set[str] | None, known: Mapping[str, str]) -> dict[str, Any]:
    """A lane per GPU worker over the last minutes, a bar per partition's GPU phase, so idle
    GPU time shows as gaps; the phases and each lane's utilisation are /status's."""
    return {"workers": farm.workers, "bars": farm.phases,
            "utilisation": {worker.pk: farm.utilisation_of(worker) for worker in farm.workers}}


# ---- why synthesis is not running more ----------------------------------------------------


IDLE, NOTHING_MORE = "idle: nothing pending", "nothing more pending"
CALM_REASONS = frozenset({IDLE, NOTHING_MORE})


def throttle_reason(host: dict[str, Any], unclaimed: int) -> str:
    """Why a live host's synthesis is not busier, from its rows in this snapshot: its claimed
    partitions still reserving their key and memory, its synthesized ones queued for the GPU
    (the engine's pacer stops claiming at synthesis slots + two per GPU worker), the operator's
    drain, circuits it refuses (no key, or not the farm's), or an empty queue."""
    active, most = host["synthesis_active"], host["synthesis_max"]
    if host["draining"]:
        return "draining: claims nothing new"
    if host.get("refused") and unclaimed:
        return f"refuses {', '.join(host['refused'])}: no key, or not the farm's (see its log)"
    if most and active >= most:
        return ""  # every slot is synthesizing: not throttled
    if host["reserving"]:
        return f"reserving key and memory for {host['reserving']} claimed ({host['memory']} held)"
    if host["synth_done"] and active + host["synth_done"] >= most + 2 * host["workers"]:
        return f"paced: {host['synth_done']} synthesized partition{'s' * (host['synth_done'] != 1)} wait for the GPU"
    if not unclaimed:
        return IDLE if not active else NOTHING_MORE
    return ""


def synthesis_reasons_context(farm: Farm) -> dict[str, Any]:
    """The synthesis panel: each live host's synthesis active and max, the partitions waiting to
    be claimed, and each host's reason for not synthesizing more, all read in the pass's one
    snapshot. "Active" is counted from the partitions in `synthesizing`, the rows the cells
    show: a host's own counter would lag its partitions and contradict the cells."""
    live, held = farm.live_hosts, farm.held
    workers = Counter(row.host for row in farm.workers)  # by host name
    unclaimed = farm.unclaimed
    names = names_of(farm, (circuit for row in live for circuit in row.refused_keys or {}))
    hosts: list[dict[str, Any]] = []
    for row in live:
        mine = held[row.pk]
        host: dict[str, Any] = {"name": row.name, "synthesis_active": mine.count(PartitionState.SYNTHESIZING),
                "synthesis_max": row.synthesis_max, "draining": row.draining, "workers": workers[row.name],
                "reserving": mine.count(PartitionState.RESERVING), "synth_done": mine.count(PartitionState.SYNTH_DONE),
                "memory": f"{fmt_bytes(mine.used)} of {fmt_bytes(mine.budget)}", "refused": [circuit_label(c, names) for c in sorted(row.refused_keys or {})]}
        host["reason"] = throttle_reason(host, unclaimed)
        hosts.append(host)
    reasons = list(dict.fromkeys(h["reason"] for h in hosts if h["reason"]))
    if not hosts:
        reasons = ["no engine running"] if unclaimed else [IDLE]
    context = {"hosts": hosts, "active": sum(h["synthesis_active"] for h in hosts),
               "max": sum(h["synthesis_max"] for h in hosts)}
    # Nothing to do is normal: said calmly; a host held back by something is a warning.
    context.update(pending=unclaimed, reason="; ".join(reasons), calm=all(r in CALM_REASONS for r in reasons))
    for host in hosts:
        host["calm"] = host["reason"] in CALM_REASONS
    return context


# ---- one job's page ---------------------------------------------------------------------


def job_detail_context(job_id: str, farm: Farm) -> dict[str, Any]:
    """A job and every partition of it, for its own page (/jobs/<id>) and that page's stream."""
    job = ProofJob.objects.select_related("host", "client").filter(job_id=job_id).first()
    parts = list(job.partitions.select_related("worker", "host", "job").order_by("index")) if job else []
    # Its circuit's expected duration, which an active job's deadline standing needs.
    expected = (expected_seconds([job.circuit_id])[job.circuit_id]
                if job and job.deadline is not None and job.state in JOB_ACTIVE else 0.0)
    return {"job_id": job_id, "job": job, "parts": parts, "expected_s": expected, "log": job_log_lines(job),
            "residency": key_residency(farm, job.kind, job.circuit_id) if job else None,
            "circuit_names": dict(names_of(farm, [job.circuit_id])) if job else {}}


def job_log_lines(job: ProofJob | None, limit: int = LOG_LINES) -> list[tuple[Any, ...]]:
    """The engines' last lines about the job, oldest first: (pk, at, level, host, partition,
    message). Read in the page's snapshot, as its rows are."""
    if job is None:
        return []
    newest = list(JobLogLine.objects.filter(job=job).order_by("-pk")
                  .values_list("pk", "at", "level", "host", "partition", "message")[:limit])
    # Appended in batches per host: two hosts' lines interleave by when they were logged.
    return sorted(newest, key=lambda line: (line[1], line[0]))
