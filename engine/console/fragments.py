"""The console's fragments: each one reads its records and renders its partial.

Every fragment is a function from the records (and the server's clock) to HTML with a stable
DOM id, so the page, a reload and the SSE stream all show the same truth. REGISTRY says which
record changes affect which fragment; the stream uses it to re-render only what a hint
touches. A render pass reads the farm's status version before and after its queries and
retries until both agree, so the version stamped on a fragment is exactly the version its
content was read at (a seqlock; SQLite's IMMEDIATE transactions would block the engine's
writers if we held one open for reading).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Count, Q
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from engine.models import EngineHost, Partition, ProofJob, StatusClock, Worker
from engine.states import JOB_ACTIVE, JobState, PartitionState

VERSION_TOKEN = "__PS_VERSION__"
TASK_STREAM_SECONDS = 300
RECENT_FAILURES = 8

# The scope of a hint is its most specific field: a partition's transition, a job's, or a
# host's own change (heartbeat, memory, keys). See scope_of().
HOST, JOB, PARTITION = "host", "job", "partition"


def fmt_ms(ms: float | None) -> str:
    """Durations as operators read them: 587ms, 5.2s, 3m 04s (mirrored in console.js)."""
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{int(ms)}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def fmt_bytes(n: float | None) -> str:
    if not n:
        return "0 B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def epoch_ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


def ms_between(start: datetime | None, end: datetime | None) -> int | None:
    return int((end - start).total_seconds() * 1000) if start and end else None


def level(fraction: float) -> str:
    """Gauge colour at the seed panel's thresholds: green, amber from 60 %, red from 85 %."""
    return "red" if fraction >= 0.85 else "amber" if fraction >= 0.60 else "green"


def stale_after_seconds() -> float:
    """A host is stale once its heartbeat is older than three beats, or the lease if shorter:
    by then its partitions are about to be requeued, so the console must say so."""
    knobs = settings.PROVINGSITE
    return min(3 * float(knobs["HEARTBEAT_SECONDS"]), float(knobs["LEASE_SECONDS"]))


def owner_colour(owner: str) -> str:
    """A stable hue per owner, so a pipeline keeps its colour across renders."""
    return f"hsl({zlib.crc32(owner.encode()) % 360} 55% 55%)"


def current_version() -> int:
    return StatusClock.objects.order_by("pk").values_list("value", flat=True).first() or 0


def _device_slot(device: str, backend: str) -> str:
    return "CPU" if device == "cpu" or backend == "cpu" else device


def _first(entry: dict[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if entry.get(name) is not None:
            return entry[name]
    return default


# ---- the reads, one per fragment ------------------------------------------------------


def hosts_context(now: datetime) -> dict[str, Any]:
    stale_s = stale_after_seconds()
    rows = []
    for host in EngineHost.objects.order_by("name"):
        age = (now - host.heartbeat_at).total_seconds() if host.heartbeat_at else None
        rows.append({
            "host": host,
            "stopped": host.stopped_at is not None,
            "stale": host.stopped_at is None and (age is None or age > stale_s),
            "heartbeat_age": fmt_ms(age * 1000 if age is not None else None),
            "heartbeat_ms": epoch_ms(host.heartbeat_at),
            "uptime": fmt_ms(ms_between(host.started_at, now)),
            "started_ms": epoch_ms(host.started_at),
        })
    return {"hosts": rows, "stale_after_ms": int(stale_s * 1000)}


def memory_context(now: datetime) -> dict[str, Any]:
    hosts = []
    farm_used = farm_budget = 0
    for host in EngineHost.objects.filter(stopped_at__isnull=True).order_by("name"):
        budget = host.memory_budget_bytes or 0
        used = host.memory_used_bytes or 0
        farm_used += used
        farm_budget += budget
        owners = sorted((host.memory_by_owner or {}).items(), key=lambda item: (-int(item[1] or 0), item[0]))
        segments = [{
            "owner": owner, "bytes": fmt_bytes(int(size or 0)), "colour": owner_colour(owner),
            "pct": 100.0 * int(size or 0) / budget if budget else 0.0,
        } for owner, size in owners]
        fraction = used / budget if budget else 0.0
        hosts.append({"host": host, "used": fmt_bytes(used), "budget": fmt_bytes(budget),
                      "pct": round(100 * fraction, 1), "level": level(fraction), "segments": segments})
    fraction = farm_used / farm_budget if farm_budget else 0.0
    return {"hosts": hosts, "farm": {"used": fmt_bytes(farm_used), "budget": fmt_bytes(farm_budget),
                                     "pct": round(100 * fraction, 1), "level": level(fraction)}}


def devices_context(now: datetime) -> dict[str, Any]:
    devices = []
    for host in EngineHost.objects.filter(stopped_at__isnull=True).order_by("name"):
        for entry in host.devices or []:
            total = int(_first(entry, "memory_total_bytes", "total_bytes", "memory_total", default=0) or 0)
            free = _first(entry, "memory_free_bytes", "free_bytes", "memory_free")
            pool = _first(entry, "pool_used_bytes", "pool_bytes", "pool_in_use", "pool_used")
            if not total:  # the CPU backend's slot has no device memory to show
                continue
            used = total - int(free) if free is not None else None
            fraction = used / total if used is not None and total else 0.0
            devices.append({
                "host": host.name, "name": _first(entry, "device", "name", "id", default="?"),
                "label": _first(entry, "label", "model", "product", default=""),
                "total": fmt_bytes(total), "used": fmt_bytes(used) if used is not None else "—",
                "pool": fmt_bytes(int(pool)) if pool is not None else "—",
                "pct": round(100 * fraction, 1), "level": level(fraction),
            })
    return {"devices": devices}


def synthesis_context(now: datetime) -> dict[str, Any]:
    hosts = list(EngineHost.objects.filter(stopped_at__isnull=True).order_by("name"))
    return {"hosts": hosts, "active": sum(h.synthesis_active for h in hosts),
            "max": sum(h.synthesis_max for h in hosts)}


def counters_context(now: datetime) -> dict[str, Any]:
    table: dict[str, dict[str, int]] = {}
    for row in ProofJob.objects.values("kind", "state").annotate(n=Count("pk")).order_by("kind"):
        table.setdefault(row["kind"], {})[row["state"]] = row["n"]
    states = [JobState.QUEUED, JobState.RUNNING, JobState.DONE, JobState.FAILED, JobState.CANCELLED]
    rows = [{"kind": kind, "cells": [by_state.get(s, 0) for s in states]} for kind, by_state in sorted(table.items())]
    totals = [sum(r["cells"][i] for r in rows) for i in range(len(states))]
    pending = Partition.objects.filter(state=PartitionState.PENDING, job__state__in=JOB_ACTIVE).count()
    return {"states": [str(s) for s in states], "rows": rows, "totals": totals,
            "queue_depth": table and sum(by.get(JobState.QUEUED, 0) for by in table.values()) or 0,
            "pending_partitions": pending}


def _cell(part: Partition, job_id: str, now: datetime) -> str:
    """One partition cell: finished phases with the server's final figures, the running phase
    with its authoritative start so the browser can tick it. Built here rather than in the
    template: a busy farm has hundreds of cells per flush, and this is the hot loop."""
    lines: list[str] = []
    for started, finished, live_state, suffix in (
            (part.synth_started_at, part.synth_finished_at, PartitionState.SYNTHESIZING, " synth"),
            (part.gpu_started_at, part.gpu_finished_at, PartitionState.GPU, " gpu")):
        if started and finished:
            lines.append(f'<span class="final">{fmt_ms(ms_between(started, finished))}{suffix}</span>')
        elif started and part.state == live_state:
            lines.append(f'<span class="tick" data-started-at="{epoch_ms(started)}" data-suffix="{suffix}">'
                         f"{fmt_ms(ms_between(started, now))}{suffix}</span>")
    if not lines:
        lines.append(f"<span>{part.state}</span>")
    return (f'<div class="cell {part.state}" data-partition="{escape(job_id)}#{part.index}" '
            f'data-state="{part.state}" title="P{part.index} {part.state}"><b>P{part.index}</b>{"".join(lines)}</div>')


def pipelines_context(now: datetime) -> dict[str, Any]:
    jobs = (ProofJob.objects.filter(state__in=JOB_ACTIVE).order_by("priority", "submitted_at", "pk")
            .prefetch_related("partitions"))
    rows = []
    for job in jobs:
        parts = sorted(job.partitions.all(), key=lambda p: p.index)
        since = job.started_at or job.submitted_at
        rows.append({
            "job": job, "cells": mark_safe("".join(_cell(p, job.job_id, now) for p in parts)),
            "done": sum(p.state == PartitionState.DONE for p in parts), "total": job.num_partitions or len(parts),
            "elapsed": fmt_ms(ms_between(since, now)), "since_ms": epoch_ms(since),
        })
    return {"pipelines": rows}


def workers_context(now: datetime) -> dict[str, Any]:
    # A worker's card is derived from the partitions on the GPU; there is no busy flag.
    proving: dict[int, list[Partition]] = {}
    for part in (Partition.objects.filter(state=PartitionState.GPU, worker__isnull=False)
                 .select_related("job").order_by("gpu_started_at", "pk")):
        proving.setdefault(part.worker_id, []).append(part)
    cards = []
    for worker in Worker.objects.select_related("host").filter(host__stopped_at__isnull=True).order_by(
            "host__name", "device", "ordinal"):
        parts = proving.get(worker.pk, [])
        cards.append({
            "worker": worker, "key": f"{worker.host.name}/{worker.device}/{worker.label}",
            "slot": _device_slot(worker.device, worker.host.backend), "parts": parts,
            "busy": [{"part": p, "text": fmt_ms(ms_between(p.gpu_started_at, now)),
                      "started": epoch_ms(p.gpu_started_at)} for p in parts],
            "partition_attr": " ".join(f"{p.job.job_id}#{p.index}" for p in parts),
        })
    return {"cards": cards}


def keys_context(now: datetime) -> dict[str, Any]:
    chips = []
    for host in EngineHost.objects.filter(stopped_at__isnull=True).order_by("name"):
        for entry in host.key_cache or []:
            in_use = bool(_first(entry, "in_use", "pinned", default=False))
            evictable = bool(_first(entry, "evictable", default=not in_use)) and not in_use
            chips.append({"host": host.name,
                          "circuit": _first(entry, "circuit", "circuit_id", "name", "key", default="?"),
                          "size": fmt_bytes(int(_first(entry, "bytes", "size_bytes", "size", default=0) or 0)),
                          "state": "in use" if in_use else "evictable" if evictable else "loaded",
                          "idle": _first(entry, "last_used_secs_ago")})
    return {"chips": chips}


def failures_context(now: datetime) -> dict[str, Any]:
    jobs = list(ProofJob.objects.filter(state=JobState.FAILED).order_by("-finished_at", "-pk")[:RECENT_FAILURES])
    parts = list(Partition.objects.filter(state=PartitionState.FAILED).select_related("job")
                 .order_by("-finished_at", "-pk")[:RECENT_FAILURES])
    return {"jobs": jobs, "parts": parts}


def taskstream_context(now: datetime) -> dict[str, Any]:
    """A lane per GPU worker over the last minutes, a bar per partition's GPU phase, so idle
    GPU time shows as gaps; utilisation is busy time over the part of the window the host
    has been up."""
    width = 1000.0
    window = timedelta(seconds=TASK_STREAM_SECONDS)
    start = now - window
    workers = list(Worker.objects.select_related("host").filter(host__stopped_at__isnull=True)
                   .order_by("host__name", "device", "ordinal"))
    parts = (Partition.objects.filter(worker__in=workers, gpu_started_at__isnull=False)
             .filter(Q(gpu_finished_at__gte=start) | Q(gpu_finished_at__isnull=True, state=PartitionState.GPU))
             .select_related("job").order_by("gpu_started_at"))
    by_worker: dict[int, list[Partition]] = {}
    for part in parts:
        by_worker.setdefault(part.worker_id, []).append(part)
    lanes = []
    span = window.total_seconds()
    for n, worker in enumerate(workers):
        bars = []
        busy = 0.0
        for part in by_worker.get(worker.pk, []):
            began = max(part.gpu_started_at, start)
            ended = part.gpu_finished_at or now
            if ended <= began:
                continue
            busy += (ended - began).total_seconds()
            bars.append({"x": round(width * (began - start).total_seconds() / span, 2),
                         "w": max(round(width * (ended - began).total_seconds() / span, 2), 1.0),
                         "part": part, "running": part.gpu_finished_at is None,
                         "colour": owner_colour(part.job.kind),
                         "text": fmt_ms(ms_between(part.gpu_started_at, part.gpu_finished_at or now))})
        up_since = max(worker.host.started_at or start, start)
        observed = max((now - up_since).total_seconds(), 1e-9)
        lanes.append({"worker": worker, "y": n * 22, "bars": bars,
                      "label": f"{worker.host.name} {_device_slot(worker.device, worker.host.backend)} {worker.label}",
                      "util": round(min(100.0, 100.0 * busy / observed), 1)})
    return {"lanes": lanes, "width": int(width), "height": max(len(lanes), 1) * 22,
            "minutes": TASK_STREAM_SECONDS // 60}


# ---- the registry -----------------------------------------------------------------------


@dataclass(frozen=True)
class Fragment:
    name: str
    dom_id: str
    template: str
    context: Callable[[datetime], dict[str, Any]]
    affected_by: frozenset[str]
    # Fragments whose picture moves with time alone (stale flags, the sliding task stream)
    # are refreshed every few seconds even without a hint.
    timed: bool = False


def _fragment(name: str, context: Callable[[datetime], dict[str, Any]], *scopes: str, timed: bool = False) -> Fragment:
    return Fragment(name, f"frag-{name}", f"console/fragments/{name}.html", context, frozenset(scopes), timed)


REGISTRY: dict[str, Fragment] = {f.name: f for f in [
    _fragment("hosts", hosts_context, HOST, timed=True),
    _fragment("memory", memory_context, HOST, PARTITION),
    _fragment("devices", devices_context, HOST),
    _fragment("synthesis", synthesis_context, HOST, PARTITION),
    _fragment("counters", counters_context, JOB, PARTITION),
    _fragment("pipelines", pipelines_context, JOB, PARTITION),
    _fragment("workers", workers_context, HOST, PARTITION),
    _fragment("keys", keys_context, HOST),
    _fragment("failures", failures_context, JOB, PARTITION),
    # Hosts and workers come and go rarely; the timed refresh picks them up.
    _fragment("taskstream", taskstream_context, PARTITION, timed=True),
]}
ALL = frozenset(REGISTRY)
TIMED = frozenset(f.name for f in REGISTRY.values() if f.timed)


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


# ---- rendering --------------------------------------------------------------------------


_TICKING_TEXT = re.compile(r'(data-started-at="\d+"[^>]*>)[^<]*')


@dataclass
class Rendered:
    """Fragments read at one version. `bodies` carry VERSION_TOKEN where the version goes, so
    two renders can be compared without the version (see digest)."""

    version: int
    now: datetime
    bodies: dict[str, str] = field(default_factory=dict)
    # False when the farm moved during every attempt: the content is then newer than
    # `version`, and the stamp says so with a trailing "+" rather than claim an exact version.
    consistent: bool = True

    @property
    def stamp(self) -> str:
        return str(self.version) if self.consistent else f"{self.version}+"

    def html(self, name: str) -> str:
        return self.bodies[name].replace(VERSION_TOKEN, self.stamp)

    def digest(self, name: str) -> str:
        # The text of a ticking duration is the server's "now" minus an unchanged start; the
        # browser computes it anyway, so it is not a change worth sending.
        stable = _TICKING_TEXT.sub(r"\1", self.bodies[name])
        return hashlib.blake2b(stable.encode(), digest_size=12).hexdigest()


def _render_one(fragment: Fragment, context: dict[str, Any], now: datetime) -> str:
    context.update(dom_id=fragment.dom_id, version=VERSION_TOKEN, now_ms=epoch_ms(now))
    return render_to_string(fragment.template, context).strip()


@contextmanager
def snapshot() -> Iterator[None]:
    """Run the reads inside one read-only snapshot of the database, so every fragment of a
    pass shows the farm at exactly one status version even while the engine writes.

    SQLite: a DEFERRED transaction (WAL gives it a snapshot at its first read). Django's
    atomic() would BEGIN IMMEDIATE here (see settings) and take the write lock from the
    engine, so the read transaction is opened by hand; it writes nothing and only commits.
    PostgreSQL: REPEATABLE READ READ ONLY. Inside a caller's transaction (tests), as is.
    """
    connection = connections["default"]
    connection.ensure_connection()
    if connection.in_atomic_block or connection.vendor not in {"sqlite", "postgresql"}:
        yield
        return
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")


def render(names: Iterable[str] = ALL, attempts: int = 4) -> Rendered:
    """Render the named fragments from one consistent read of the records.

    The reads run in a snapshot; the version is also read before and after them, which
    confirms the snapshot (and is the only guard where a caller's transaction is reused).
    Templates render after the reads: the contexts hold evaluated rows.
    """
    wanted = [REGISTRY[n] for n in sorted(set(names))]
    consistent = False
    for _ in range(attempts):
        with snapshot():
            before = current_version()
            now = timezone.now()
            contexts = {f.name: f.context(now) for f in wanted}
            consistent = current_version() == before
        if consistent:
            break
    # If the farm moved during every read, the stamp is marked inexact; the hints that
    # moved it are already on their way and will make the stream render these again.
    bodies = {f.name: _render_one(f, contexts[f.name], now) for f in wanted}
    return Rendered(before, now, bodies, consistent=consistent)


def clock_html(rendered: Rendered) -> str:
    """The server's clock and version, swapped in with every flush so the browser can correct
    its own clock's skew before ticking durations."""
    return (f'<span id="server-clock" hx-swap-oob="true" data-now="{epoch_ms(rendered.now)}" '
            f'data-version="{rendered.stamp}"></span>')
