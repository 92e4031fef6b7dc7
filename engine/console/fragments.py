"""The console's fragments: each one reads its records and renders its partial.

Every fragment is a function from the records (and the server's clock) to HTML with a stable
DOM id, so the page, a reload and the SSE stream all show the same truth. REGISTRY says which
record changes affect which fragment; the stream uses it to re-read only what a hint touches.

The busy fragments are trees of units, each an element with a stable id of its own that the
stream can swap by itself: the pipelines panel holds a row per job (a head, and a cell per
partition), the workers panel a card per worker, the task stream a lane per worker. A
transition then costs the few hundred bytes of the units it changed, not a whole panel. A
unit's digest covers its own shape only (which children, in which order), so a changed cell
does not resend its row; a unit whose shape changed (a job started or ended, a worker came)
is sent whole, children included. A partition hint re-reads its own job's row, not every
job's; the panel's shape (which jobs are active) is read every time, and when it moved every
row is read in the same pass.

A render pass runs all its queries, the status clock included, in one read-only database
snapshot (``engine.status.read.one_snapshot``), so the version stamped on a unit is exactly
the version its content was read at.

The hot fragments (pipelines, workers, task stream) are built as Python strings from
values() rows: they are rendered on nearly every flush of a busy farm, and model instances
plus template nodes were most of a pass's cost. The rest stay Django templates.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape as _esc
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from engine.console.prepared import Prepared
from engine.models import EngineHost, Partition, ProofJob, StatusClock, Worker
from engine.snapshot import keys_on_gpu
from engine.states import JOB_ACTIVE, JobState, PartitionState
from engine.status.read import one_snapshot

VERSION_TOKEN = "__PS_VERSION__"
OOB_ATTR = ' hx-swap-oob="true"'
TASK_STREAM_SECONDS = 300
# The task stream's geometry moves with the clock alone; it is resent when a bar starts or
# ends, and otherwise once per step of this many seconds.
TASK_STREAM_STEP_S = 5
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


_VERSION = Prepared(lambda: StatusClock.objects.order_by("pk").values_list("value")[:1])


def current_version() -> int:
    return int(_VERSION.value(default=0) or 0)


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
    # "Active" is counted from the partitions in `synthesizing`, the rows the cells show, in the
    # same snapshot: a host's own counter would lag its partitions and contradict the cells.
    active = dict(Partition.objects.filter(state=PartitionState.SYNTHESIZING, host__stopped_at__isnull=True)
                  .values("host_id").annotate(n=Count("pk")).values_list("host_id", "n"))
    hosts = [{"name": name, "synthesis_active": active.get(pk, 0), "synthesis_max": most} for pk, name, most in
             EngineHost.objects.filter(stopped_at__isnull=True).order_by("name")
             .values_list("pk", "name", "synthesis_max")]
    return {"hosts": hosts, "active": sum(h["synthesis_active"] for h in hosts),
            "max": sum(h["synthesis_max"] for h in hosts)}


_JOB_COUNTS = Prepared(lambda: ProofJob.objects.values_list("kind", "state").annotate(n=Count("pk")).order_by("kind"))
_PENDING = Prepared(lambda: Partition.objects.filter(state=PartitionState.PENDING, job__state__in=JOB_ACTIVE)
                    .values("state").annotate(n=Count("pk")).values_list("n"))


def counters_context(now: datetime) -> dict[str, Any]:
    table: dict[str, dict[str, int]] = {}
    for kind, state, n in _JOB_COUNTS.rows():
        table.setdefault(kind, {})[state] = n
    states = [JobState.QUEUED, JobState.RUNNING, JobState.DONE, JobState.FAILED, JobState.CANCELLED]
    rows = [{"kind": kind, "cells": [by_state.get(s, 0) for s in states]} for kind, by_state in sorted(table.items())]
    totals = [sum(r["cells"][i] for r in rows) for i in range(len(states))]
    pending = int(_PENDING.value(default=0))
    return {"states": [str(s) for s in states], "rows": rows, "totals": totals,
            "queue_depth": table and sum(by.get(JobState.QUEUED, 0) for by in table.values()) or 0,
            "pending_partitions": pending}


def keys_context(now: datetime) -> dict[str, Any]:
    chips = []
    on_gpu = keys_on_gpu()
    for host in EngineHost.objects.filter(stopped_at__isnull=True).order_by("name"):
        for entry in host.key_cache or []:
            circuit = _first(entry, "circuit", "circuit_id", "name", "key", default="?")
            # The engine's own pin count may lag its partitions: a key whose circuit is on the
            # GPU in this snapshot is in use, whatever the last heartbeat said.
            in_use = bool(_first(entry, "in_use", "pinned", default=False)) or (host.pk, circuit) in on_gpu
            evictable = bool(_first(entry, "evictable", default=not in_use)) and not in_use
            chips.append({"host": host.name, "circuit": circuit,
                          "size": fmt_bytes(int(_first(entry, "bytes", "size_bytes", "size", default=0) or 0)),
                          "state": "in use" if in_use else "evictable" if evictable else "loaded",
                          "idle": _first(entry, "last_used_secs_ago")})
    return {"chips": chips}


_FAILED_JOBS = Prepared(lambda: ProofJob.objects.filter(state=JobState.FAILED).order_by("-finished_at", "-pk")
                        .values_list("job_id", "kind", "error")[:RECENT_FAILURES])
_FAILED_PARTS = Prepared(lambda: Partition.objects.filter(state=PartitionState.FAILED).order_by("-finished_at", "-pk")
                         .values_list("index", "job__job_id", "attempt", "error")[:RECENT_FAILURES])


def failures_context(now: datetime) -> dict[str, Any]:
    jobs = [{"job_id": job_id, "kind": kind, "error": error} for job_id, kind, error in _FAILED_JOBS.rows()]
    parts = [{"index": index, "job_id": job_id, "attempt": attempt, "error": error}
             for index, job_id, attempt, error in _FAILED_PARTS.rows()]
    return {"jobs": jobs, "parts": parts}


# ---- what a pass reads, and what it yields ------------------------------------------------


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


@dataclass(frozen=True)
class Unit:
    """One swappable element. `html` is its markup as nested in its parent, VERSION_TOKEN where
    the version goes; None when the pass read only its shape (its children were not all read).
    `oob_at` is where the swap attribute goes when it is sent by itself (0 for a fragment's
    root, whose markup carries it already). `digest` changes exactly when it must be sent."""

    key: str
    html: str | None
    digest: str
    children: tuple[str, ...] = ()
    oob_at: int = 0


_TICKING_TEXT = re.compile(r'(data-started-at="\d+"[^>]*>)[^<]*')


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def content_digest(html: str) -> str:
    """The text of a ticking duration is the server's "now" minus an unchanged start; the
    browser computes it anyway, so it is not a change worth sending."""
    return _digest(_TICKING_TEXT.sub(r"\1", html))


def _leaf(key: str, dom_id: str, rest: str) -> Unit:
    """A child unit: `<div id="dom_id"` + rest, its digest from its content."""
    opening = f'<div id="{dom_id}"'
    html = opening + rest
    return Unit(key, html, content_digest(html), oob_at=len(opening))


def _tick(started: datetime | None, now: datetime, suffix: str = "", css: str = "tick") -> str:
    if started is None:
        return f'<span class="{css}">—</span>'
    suffix_attr = f' data-suffix="{suffix}"' if suffix else ""
    return (f'<span class="{css}" data-started-at="{epoch_ms(started)}"{suffix_attr}>'
            f"{fmt_ms(ms_between(started, now))}{suffix}</span>")


# ---- pipelines: panel → row per job → head + cell per partition ------------------------

_JOB_FIELDS = ("pk", "job_id", "kind", "state", "started_at", "submitted_at", "num_partitions")
_CELL_FIELDS = ("job", "index", "state", "synth_started_at", "synth_finished_at", "gpu_started_at", "gpu_finished_at")


_ACTIVE_JOBS = Prepared(lambda: ProofJob.objects.filter(state__in=JOB_ACTIVE)
                        .order_by("priority", "submitted_at", "pk").values_list(*_JOB_FIELDS))
# Every active partition, in one fixed query: cheaper than compiling an IN list of the hinted
# jobs each pass. Only the hinted jobs' rows are built and compared.
_ACTIVE_CELLS = Prepared(lambda: Partition.objects.filter(job__state__in=JOB_ACTIVE).order_by("job", "index")
                         .values_list(*_CELL_FIELDS))


def pipelines_context(now: datetime, want: Want, known: Mapping[str, str]) -> dict[str, Any]:
    jobs = _ACTIVE_JOBS.rows()
    shape = _digest(repr([(job[0], job[1]) for job in jobs]))
    everything = want.jobs is None or known.get("pipelines") != shape
    chosen = jobs if everything else [job for job in jobs if job[1] in (want.jobs or ())]
    parts: dict[int, list[tuple[Any, ...]]] = {}
    if chosen:
        for row in _ACTIVE_CELLS.rows():
            parts.setdefault(row[0], []).append(row)
    return {"jobs": jobs, "shape": shape, "everything": everything, "chosen": chosen, "parts": parts}


def _cell_unit(job_pk: int, job_id: str, part: tuple[Any, ...], now: datetime) -> Unit:
    """One partition cell: finished phases with the server's final figures, the running phase
    with its authoritative start so the browser can tick it."""
    _, index, state, synth_started, synth_finished, gpu_started, gpu_finished = part
    lines: list[str] = []
    for started, finished, live_state, suffix in (
            (synth_started, synth_finished, PartitionState.SYNTHESIZING, " synth"),
            (gpu_started, gpu_finished, PartitionState.GPU, " gpu")):
        if started and finished:
            lines.append(f'<span class="final">{fmt_ms(ms_between(started, finished))}{suffix}</span>')
        elif started and state == live_state:
            lines.append(_tick(started, now, suffix))
    if not lines:
        lines.append(f"<span>{state}</span>")
    return _leaf(f"pipelines/{job_pk}/{index}", f"cell-{job_pk}-{index}",
                 f' class="cell {state}" data-partition="{_esc(job_id)}#{index}" data-state="{state}" '
                 f'data-version="{VERSION_TOKEN}" title="P{index} {state}"><b>P{index}</b>{"".join(lines)}</div>')


def pipelines_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    units: list[Unit] = []
    rows_html: list[str] = []
    for pk, job_id, kind, state, started, submitted, total in context["chosen"]:
        parts = context["parts"].get(pk, [])
        cells = [_cell_unit(pk, job_id, part, now) for part in parts]
        done = sum(part[2] == PartitionState.DONE for part in parts)
        head = _leaf(f"pipelines/{pk}/head", f"job-{pk}-head",
                     f' class="pipeline-head" data-version="{VERSION_TOKEN}">'
                     f'<a class="job-id" href="{_esc(reverse("console-job", args=[job_id]))}">{_esc(job_id)}</a> '
                     f'<span class="kind">{_esc(kind)}</span> <span class="state">{_esc(state)}</span> '
                     f'{_tick(started or submitted, now, css="elapsed tick")} '
                     f'<span class="done">{done}/{total or len(parts)} done</span></div>')
        key = f"pipelines/{pk}"
        html = (f'<div id="job-{pk}" class="pipeline" data-job="{_esc(job_id)}">{head.html}'
                f'<div class="cells">{"".join(c.html or "" for c in cells)}</div></div>')
        shape = _digest(repr((job_id, kind, [part[1] for part in parts])))
        units.append(Unit(key, html, shape, (head.key, *(c.key for c in cells)), oob_at=len(f'<div id="job-{pk}"')))
        units.append(head)
        units.extend(cells)
        rows_html.append(html)
    body = "".join(rows_html) if context["jobs"] else '<p class="empty">Nothing in flight.</p>'
    root = Unit(fragment.name,
                (f'<section id="{fragment.dom_id}" class="panel pipelines"{OOB_ATTR} data-version="{VERSION_TOKEN}">'
                 f"<h2>Active pipelines</h2>{body}</section>") if context["everything"] else None,
                context["shape"], tuple(f"pipelines/{job[0]}" for job in context["jobs"]))
    return [root, *units]


# ---- GPU workers: panel → card per worker -----------------------------------------------

_WORKER_FIELDS = ("pk", "ordinal", "device", "host__name", "host__backend")


_LIVE_WORKERS = Prepared(lambda: Worker.objects.filter(host__stopped_at__isnull=True)
                         .order_by("host__name", "device", "ordinal").values_list(*_WORKER_FIELDS, "host__started_at"))
_ON_GPU = Prepared(lambda: Partition.objects.filter(state=PartitionState.GPU, worker__isnull=False)
                   .order_by("gpu_started_at", "pk")
                   .values_list("worker", "index", "job__job_id", "job__kind", "gpu_started_at"))


def workers_context(now: datetime, want: Want, known: Mapping[str, str]) -> dict[str, Any]:
    # A worker's card is derived from the partitions on the GPU; there is no busy flag.
    proving: dict[int, list[tuple[Any, ...]]] = {}
    for row in _ON_GPU.rows():
        proving.setdefault(row[0], []).append(row)
    return {"workers": _LIVE_WORKERS.rows(), "proving": proving}


def workers_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    cards: list[Unit] = []
    for pk, ordinal, device, host, backend, _ in context["workers"]:
        parts = context["proving"].get(pk, [])
        state = "proving" if parts else "idle"
        doing = "".join(
            f'<div class="doing">proving P{index} of <span class="job-id">{_esc(job_id)}</span> '
            f'<span class="kind">{_esc(kind)}</span></div><div class="busy">busy {_tick(started, now)}</div>'
            for _, index, job_id, kind, started in parts) or '<div class="doing">idle</div>'
        attr = _esc(" ".join(f"{job_id}#{index}" for _, index, job_id, _, _ in parts))
        cards.append(_leaf(
            f"workers/{pk}", f"worker-{pk}",
            f' class="card {state}" data-worker="{_esc(f"{host}/{device}/W{ordinal}")}" data-state="{state}" '
            f'data-partition="{attr}" data-version="{VERSION_TOKEN}"><div class="card-head"><strong>W{ordinal}</strong> '
            f'<span class="device">{_esc(_device_slot(device, backend))}</span> <span class="host">{_esc(host)}</span>'
            f"</div>{doing}</div>"))
    body = "".join(c.html or "" for c in cards) or '<p class="empty">No workers registered.</p>'
    keys = tuple(c.key for c in cards)
    root = Unit(fragment.name, f'<section id="{fragment.dom_id}" class="panel workers"{OOB_ATTR} '
                f'data-version="{VERSION_TOKEN}"><h2>GPU workers</h2><div class="cards">{body}</div></section>',
                _digest(repr(("workers", keys))), keys)
    return [root, *cards]


# ---- task stream: panel → lane per worker ----------------------------------------------


_GPU_PHASES = Prepared(lambda since: (
    Partition.objects.filter(worker__host__stopped_at__isnull=True, gpu_started_at__isnull=False)
    .filter(Q(gpu_finished_at__gte=since) | Q(gpu_finished_at__isnull=True, state=PartitionState.GPU))
    .order_by("gpu_started_at")
    .values_list("worker", "index", "job__job_id", "job__kind", "gpu_started_at", "gpu_finished_at")))


def taskstream_context(now: datetime, want: Want, known: Mapping[str, str]) -> dict[str, Any]:
    """A lane per GPU worker over the last minutes, a bar per partition's GPU phase, so idle
    GPU time shows as gaps."""
    # The window's start, rounded down to a step so the query is compiled once a step; bars
    # that ended before the exact start are dropped when drawn.
    since = datetime.fromtimestamp((now.timestamp() - TASK_STREAM_SECONDS) // TASK_STREAM_STEP_S
                                   * TASK_STREAM_STEP_S, tz=now.tzinfo)
    by_worker: dict[int, list[tuple[Any, ...]]] = {}
    for row in _GPU_PHASES.rows(since):
        by_worker.setdefault(row[0], []).append(row)
    return {"workers": _LIVE_WORKERS.rows(), "bars": by_worker}


def taskstream_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """Utilisation is busy time over the part of the window the host has been up."""
    width = 1000.0
    span = float(TASK_STREAM_SECONDS)
    start = now - timedelta(seconds=TASK_STREAM_SECONDS)
    step = int(now.timestamp() // TASK_STREAM_STEP_S)
    lanes: list[Unit] = []
    for pk, ordinal, device, host, backend, host_started in context["workers"]:
        bars: list[str] = []
        seen: list[tuple[Any, ...]] = []
        busy = 0.0
        for _, index, job_id, kind, gpu_started, gpu_finished in context["bars"].get(pk, []):
            began = max(gpu_started, start)
            ended = gpu_finished or now
            if ended <= began:
                continue
            busy += (ended - began).total_seconds()
            seen.append((job_id, index, epoch_ms(gpu_started), epoch_ms(gpu_finished)))
            x = round(width * (began - start).total_seconds() / span, 2)
            w = max(round(width * (ended - began).total_seconds() / span, 2), 1.0)
            text = fmt_ms(ms_between(gpu_started, ended))
            bars.append(f'<rect class="bar{" running" if gpu_finished is None else ""}" x="{x}" y="2" width="{w}" '
                        f'height="16" fill="{owner_colour(kind)}"><title>P{index} of {_esc(job_id)} ({_esc(kind)}) '
                        f"{text} gpu</title></rect>")
        up_since = max(host_started or start, start)
        observed = max((now - up_since).total_seconds(), 1e-9)
        util = round(min(100.0, 100.0 * busy / observed), 1)
        label = _esc(f"{host} {_device_slot(device, backend)} W{ordinal}")
        opening = f'<div id="lane-{pk}"'
        html = (f'{opening} class="lane-row" data-worker-lane="{label}" data-version="{VERSION_TOKEN}">'
                f'<span class="lane-label">{label} <b>{util}%</b></span>'
                f'<svg viewBox="0 0 {int(width)} 20" preserveAspectRatio="none" role="img" '
                f'aria-label="GPU task stream of {label}"><rect class="lane" x="0" y="0" width="{int(width)}" '
                f'height="20"></rect>{"".join(bars)}</svg></div>')
        # Not the geometry (it slides with the clock) but which bars there are, and the step.
        lanes.append(Unit(f"taskstream/{pk}", html, _digest(repr((label, seen, step))), oob_at=len(opening)))
    minutes = TASK_STREAM_SECONDS // 60
    body = (f'<div class="stream">{"".join(lane.html or "" for lane in lanes)}</div>' if lanes
            else '<p class="empty">No GPU workers.</p>')
    keys = tuple(lane.key for lane in lanes)
    root = Unit(fragment.name, f'<section id="{fragment.dom_id}" class="panel taskstream"{OOB_ATTR} '
                f'data-version="{VERSION_TOKEN}"><h2>Task stream <span class="sub">GPU phase per partition, '
                f"last {minutes} minutes</span></h2>{body}</section>", _digest(repr(("taskstream", keys))), keys)
    return [root, *lanes]


# ---- the registry -----------------------------------------------------------------------

Reader = Callable[[datetime, Want, Mapping[str, str]], dict[str, Any]]


@dataclass(frozen=True)
class Fragment:
    name: str
    dom_id: str
    read: Reader
    build: Callable[[Fragment, dict[str, Any], datetime], list[Unit]]
    affected_by: frozenset[str]


def _templated(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    context.update(dom_id=fragment.dom_id, version=VERSION_TOKEN, now_ms=epoch_ms(now))
    html = render_to_string(f"console/fragments/{fragment.name}.html", context).strip()
    return [Unit(fragment.name, html, content_digest(html))]


def _plain(context: Callable[[datetime], dict[str, Any]]) -> Reader:
    def read(now: datetime, want: Want, known: Mapping[str, str]) -> dict[str, Any]:
        return context(now)
    return read


def _fragment(name: str, read: Reader, *scopes: str,
              build: Callable[[Fragment, dict[str, Any], datetime], list[Unit]] = _templated) -> Fragment:
    return Fragment(name, f"frag-{name}", read, build, frozenset(scopes))


REGISTRY: dict[str, Fragment] = {f.name: f for f in [
    _fragment("hosts", _plain(hosts_context), HOST),
    # Memory and devices are host rows, written only by the host's own update (a host hint).
    _fragment("memory", _plain(memory_context), HOST),
    _fragment("devices", _plain(devices_context), HOST),
    # Synthesis counts partitions in `synthesizing`: a partition's transition moves it.
    _fragment("synthesis", _plain(synthesis_context), HOST, PARTITION),
    _fragment("counters", _plain(counters_context), JOB, PARTITION),
    _fragment("pipelines", pipelines_context, JOB, PARTITION, build=pipelines_units),
    _fragment("workers", workers_context, HOST, PARTITION, build=workers_units),
    _fragment("keys", _plain(keys_context), HOST, PARTITION),
    _fragment("failures", _plain(failures_context), JOB, PARTITION),
    # Hosts and workers come and go rarely; the stream's periodic full pass picks them up.
    _fragment("taskstream", taskstream_context, PARTITION, build=taskstream_units),
]}
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


# ---- rendering --------------------------------------------------------------------------


@dataclass
class Rendered:
    """Units read at one version, keyed by unit; `roots` are the fragments of the pass."""

    version: int
    now: datetime
    units: dict[str, Unit] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)
    # False only when the read joined a caller's READ COMMITTED transaction (not one snapshot):
    # the stamp then says so with a trailing "+" rather than claim an exact version.
    consistent: bool = True
    # Every fragment and every unit was read (a snapshot).
    full: bool = False

    @property
    def stamp(self) -> str:
        return str(self.version) if self.consistent else f"{self.version}+"

    def html(self, name: str) -> str:
        """A whole fragment, as the page embeds it."""
        body = self.units[name].html
        if body is None:
            raise ValueError(f"{name} was read in part; render it in full for its HTML")
        return body.replace(VERSION_TOKEN, self.stamp)

    def oob(self, key: str) -> str:
        """A unit as a stand-alone out-of-band swap."""
        unit = self.units[key]
        if unit.html is None:
            raise ValueError(f"{key} was read in part")
        body = unit.html if not unit.oob_at else unit.html[:unit.oob_at] + OOB_ATTR + unit.html[unit.oob_at:]
        return body.replace(VERSION_TOKEN, self.stamp)

    def digest(self, key: str) -> str:
        return self.units[key].digest

    def descendants(self, key: str) -> Iterator[Unit]:
        for child in self.units[key].children:
            if child in self.units:
                yield self.units[child]
                yield from self.descendants(child)


def _scope_names(scope: str) -> set[str]:
    return {f.name for f in REGISTRY.values() if scope in f.affected_by}


def changed_since(want: Want, since: int) -> Want:
    """``want`` plus every unit whose records were written after ``since`` (the version the
    previous pass read). Hints say what to look at, but one can arrive after the pass that
    reads its commit: a card re-read for another hint would then show a partition on the GPU
    while that partition's cell, not hinted yet, still showed it waiting. Reading what the
    versions say changed puts every unit of the frame at the same snapshot."""
    out = Want(set(want.names), None if want.jobs is None else set(want.jobs))
    moved_parts = set(Partition.objects.filter(version__gt=since).values_list("job__job_id", flat=True))
    moved_jobs = set(ProofJob.objects.filter(version__gt=since).values_list("job_id", flat=True))
    if moved_parts:
        out.names |= _scope_names(PARTITION)
    if moved_jobs:
        out.names |= _scope_names(JOB)
    if EngineHost.objects.filter(version__gt=since).exists():
        out.names |= _scope_names(HOST)
    if out.jobs is not None:
        out.jobs |= moved_parts | moved_jobs
    return out


def render(want: Want | Iterable[str] = ALL, known: Mapping[str, str] | None = None,
           since: int | None = None) -> Rendered:
    """Read the wanted fragments in one database snapshot, the status clock included, so the
    version stamped on every unit is exactly the version its content was read at.

    With ``since`` (the version the caller's previous pass read), everything written after it
    is read too, so the pass shows every change up to its own version. Markup is built after
    the reads: the contexts hold evaluated rows. `known` holds the digests of the roots the
    caller last received, so a panel whose shape moved is read whole.
    """
    if not isinstance(want, Want):
        want = Want(set(want), None)
    known = known or {}
    with one_snapshot() as snap:
        version = current_version()
        if since is not None and not want.full:
            want = changed_since(want, since)
        wanted = [REGISTRY[n] for n in sorted(want.names)]
        now = timezone.now()
        contexts = {f.name: f.read(now, want, known) for f in wanted}
    units: dict[str, Unit] = {}
    for f in wanted:
        for unit in f.build(f, contexts[f.name], now):
            units[unit.key] = unit
    return Rendered(version, now, units, [f.name for f in wanted], consistent=snap.exact, full=want.full)


def clock_html(rendered: Rendered) -> str:
    """The server's clock and version, swapped in with every flush so the browser can correct
    its own clock's skew before ticking durations."""
    return (f'<span id="server-clock" hx-swap-oob="true" data-now="{epoch_ms(rendered.now)}" '
            f'data-version="{rendered.stamp}"></span>')
