"""History, not only five minutes: proofs and failures per minute, queue depth, active
partitions and per-worker utilisation over the last hour, 6 hours, day or week, read from the
records in one snapshot and drawn on the server as SVG (no JavaScript, no chart library).

Every series is derived from timestamps the records already keep: a job counts as proved or
failed in the bucket of its ``finished_at``; a job waits in the queue from ``submitted_at``
until it starts (or ends), a partition is active from ``claimed_at`` until ``finished_at``,
and each bucket shows the most of them at any moment inside it and their time-weighted mean
(a sample at the bucket's end missed every burst shorter than a bucket); a worker's
utilisation in a bucket is engine.status.utilisation's figure over that bucket, the one
/status and the task stream show over their window.

Below the charts, the range's throughput and cost per kind and per host: the figures
GET /api/v1/stats gives (engine.status.stats), read in the same snapshot as the charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from engine.console.views import _require_viewer
from engine.format import fmt_ms
from engine.models import Partition, ProofJob, Worker
from engine.states import JobState
from engine.status.read import one_snapshot
from engine.status.stats import PHASE_NAMES, stats
from engine.status.utilisation import Span, gpu_span, utilisation

# (span, buckets, label): a bucket of 1, 5, 15 and 60 minutes
WINDOWS = {
    "hour": (timedelta(hours=1), 60, "hour"),
    "6h": (timedelta(hours=6), 72, "6 hours"),
    "day": (timedelta(days=1), 96, "day"),
    "week": (timedelta(days=7), 168, "7 days"),
}
WIDTH, HEIGHT, PAD = 1200, 140, 28


@dataclass(frozen=True)
class Series:
    title: str
    unit: str
    values: list[float]  # per bucket; for a count of things at once, the most at any moment
    means: list[float] | None = None  # the time-weighted mean per bucket, for such counts
    counts: bool = False  # whole numbers: labelled without decimals


def _edges(now: datetime, span: timedelta, buckets: int) -> list[datetime]:
    step = span / buckets
    return [now - span + step * i for i in range(buckets + 1)]


def _bucket(moment: datetime, edges: list[datetime]) -> int | None:
    if moment < edges[0] or moment >= edges[-1]:
        return None
    step = (edges[-1] - edges[0]) / (len(edges) - 1)
    return min(len(edges) - 2, int((moment - edges[0]) / step))


def _per_minute(moments: list[datetime], edges: list[datetime]) -> list[float]:
    counts = [0.0] * (len(edges) - 1)
    for moment in moments:
        index = _bucket(moment, edges)
        if index is not None:
            counts[index] += 1
    minutes = (edges[1] - edges[0]).total_seconds() / 60
    return [c / minutes for c in counts]


def _concurrency(intervals: list[tuple[datetime, datetime]], edges: list[datetime]) -> tuple[list[float], list[float]]:
    """Per bucket, how many of the intervals were open at once at most, and on average over
    the bucket's time. One sweep over their starts and ends (an end sorts before a start at
    the same moment: a job handed on is not counted twice)."""
    events = sorted([(a, 1) for a, b in intervals if b > a] + [(b, -1) for a, b in intervals if b > a])
    buckets = len(edges) - 1
    peaks, means = [0.0] * buckets, [0.0] * buckets
    level, i = 0, 0
    while i < len(events) and events[i][0] <= edges[0]:
        level += events[i][1]
        i += 1
    for b in range(buckets):
        lo, hi = edges[b], edges[b + 1]
        at, peak, area = lo, level, 0.0
        while i < len(events) and events[i][0] < hi:
            moment, step = events[i]
            area += level * (moment - at).total_seconds()
            at, level = moment, level + step
            peak = max(peak, level)
            i += 1
        area += level * (hi - at).total_seconds()
        peaks[b], means[b] = float(peak), area / (hi - lo).total_seconds()
    return peaks, means


def _queue_depth(edges: list[datetime], now: datetime) -> Series:
    start = edges[0]
    rows = (ProofJob.objects.filter(submitted_at__lt=edges[-1])
            .filter(Q(started_at__isnull=True) | Q(started_at__gt=start))
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start))
            .values_list("submitted_at", "started_at", "finished_at"))
    waits = [(submitted, started or finished or now) for submitted, started, finished in rows]
    return Series("queue depth", "jobs", *_concurrency(waits, edges), counts=True)


def _active_partitions(edges: list[datetime], now: datetime) -> Series:
    rows = (Partition.objects.filter(claimed_at__isnull=False, claimed_at__lt=edges[-1])
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=edges[0]))
            .values_list("claimed_at", "finished_at"))
    spans = [(claimed, finished or now) for claimed, finished in rows if claimed is not None]
    return Series("active partitions", "partitions", *_concurrency(spans, edges), counts=True)


def _utilisation(edges: list[datetime], now: datetime) -> list[Series]:
    start, end = edges[0], edges[-1]
    spans: dict[int, list[Span]] = {}
    for worker_id, started, finished, state, ended in (
            Partition.objects.filter(worker__isnull=False, gpu_started_at__lt=end)
            .filter(Q(gpu_finished_at__isnull=True) | Q(gpu_finished_at__gt=start))
            .values_list("worker_id", "gpu_started_at", "gpu_finished_at", "state", "finished_at")):
        span = gpu_span(started, finished, state, ended, now) if started is not None else None
        if span is not None:
            spans.setdefault(worker_id, []).append(span)
    out = []
    for worker in Worker.objects.select_related("host").filter(pk__in=spans).order_by("host__name", "device", "ordinal"):
        # Each bucket is a window of its own, observed whole: the host's latest start does not
        # hide what its earlier runs did.
        shares = [utilisation(spans[worker.pk], edges[i], edges[i + 1], None) for i in range(len(edges) - 1)]
        out.append(Series(f"{worker.host.name} {worker.device} W{worker.ordinal} utilisation", "%",
                          [100 * share for share in shares]))
    return out


def read_history(window: str, now: datetime) -> tuple[list[datetime], list[Series]]:
    span, buckets, _ = WINDOWS[window]
    edges = _edges(now, span, buckets)
    ended = [(t, s) for t, s in ProofJob.objects.filter(finished_at__gte=edges[0]).values_list("finished_at", "state")
             if t is not None]
    series = [
        Series("proofs per minute", "/min", _per_minute([t for t, s in ended if s == JobState.DONE], edges)),
        Series("failures per minute", "/min", _per_minute([t for t, s in ended if s == JobState.FAILED], edges)),
        _queue_depth(edges, now),
        _active_partitions(edges, now),
        *_utilisation(edges, now),
    ]
    return edges, series


def _figure(value: float, counts: bool) -> str:
    return f"{value:.0f}" if counts else f"{value:.2f}"


def svg(series: Series, edges: list[datetime], dom_id: str) -> str:
    """One bar chart with a time axis: a bar per bucket (the most at once, for counts, with a
    bar of the mean inside it), the peak labelled."""
    top = max(series.values, default=0.0) or 1.0
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = plot_w / max(1, len(series.values))
    means: Sequence[float | None] = series.means or [None] * len(series.values)

    def bar(i: int, v: float, cls: str) -> str:
        return (f'<rect class="{cls}" x="{PAD + i * step:.1f}" y="{PAD + plot_h * (1 - v / top):.1f}" '
                f'width="{max(step - 1, 1):.1f}" height="{plot_h * v / top:.1f}">')

    bars = "".join(
        bar(i, v, "bar") + f"<title>{edges[i]:%H:%M} {_figure(v, series.counts)}"
        + (f" at most, {m:.1f} on average" if m is not None else "") + "</title></rect>"
        + (bar(i, m, "mean") + "</rect>" if m else "")
        for i, (v, m) in enumerate(zip(series.values, means, strict=True)) if v > 0)
    ticks = "".join(
        f'<text class="tick" x="{PAD + i * step:.1f}" y="{HEIGHT - 8}">{edges[i].astimezone():%d %H:%M}</text>'
        for i in range(0, len(series.values), max(1, len(series.values) // 8)))
    peak = _figure(max(series.values, default=0.0), series.counts)
    mean = f", mean {sum(series.means) / len(series.means):.1f}" if series.means else ""
    return (f'<svg id="{escape(dom_id)}" class="history" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(series.title)}" data-peak="{peak}"><text class="title" x="{PAD}" y="16">'
            f'{escape(series.title)} (peak {peak} {escape(series.unit)}{mean})</text>'
            f'<line class="axis" x1="{PAD}" y1="{PAD + plot_h}" x2="{WIDTH - PAD}" y2="{PAD + plot_h}"/>'
            f"{bars}{ticks}</svg>")


@login_required
def history_page(request: HttpRequest) -> HttpResponse:
    _require_viewer(request)
    window = request.GET.get("window", "hour")
    window = window if window in WINDOWS else "hour"
    with one_snapshot():
        now = timezone.now()
        edges, series = read_history(window, now)
        figures = stats(edges[0], now)
    charts = [svg(s, edges, f"history-{i}") for i, s in enumerate(series)]
    windows = [(key, label) for key, (_, _, label) in WINDOWS.items()]
    return render(request, "console/history.html", {
        "charts": charts, "window": window, "windows": windows, "phases": PHASE_NAMES,
        "kinds": [_throughput_row(row["kind"], row) for row in figures["kinds"]],
        "hosts": [_throughput_row(row["host"], row) for row in figures["hosts"]]})


def _throughput_row(name: str, row: dict[str, Any]) -> dict[str, Any]:
    """One line of the throughput table, its figures as the page prints them."""
    phases = [(fmt_ms(p["mean_ms"]), fmt_ms(p["p95_ms"])) for p in (row["phases"][n] for n in PHASE_NAMES)]
    busy = row.get("device_busy")
    return {"name": name, "proofs": row["proofs"], "partitions": row["partitions"],
            "proofs_per_hour": f"{row['proofs_per_hour']:.1f}", "partitions_per_hour": f"{row['partitions_per_hour']:.1f}",
            "phases": phases, "device_busy": f"{busy:.0%}" if busy is not None else "—",
            "cost_per_proof": _money(row["cost_per_proof"]), "cost_per_hour": _money(row.get("cost_per_hour"))}


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"
