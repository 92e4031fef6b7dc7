"""History, not only five minutes: proofs and failures per minute, queue depth and per-worker
utilisation over the last hour or day, read from the records in one snapshot and drawn on the
server as SVG (no JavaScript, no chart library).

Every series is derived from timestamps the records already keep: a job counts as proved or
failed in the bucket of its ``finished_at``; the queue depth at a moment is the number of jobs
submitted by then and not yet started (nor ended); a worker's utilisation in a bucket is the
share of it its partitions spent between ``gpu_started_at`` and ``gpu_finished_at``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from engine.console.views import _require_viewer
from engine.models import Partition, ProofJob, Worker
from engine.states import JobState
from engine.status.read import one_snapshot

WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 96)}
WIDTH, HEIGHT, PAD = 720, 140, 28


@dataclass(frozen=True)
class Series:
    title: str
    unit: str
    values: list[float]


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


def _queue_depth(edges: list[datetime]) -> list[float]:
    start = edges[0]
    rows = list(ProofJob.objects.filter(Q(started_at__isnull=True) | Q(started_at__gt=start),
                                        Q(finished_at__isnull=True) | Q(finished_at__gt=start))
                .values_list("submitted_at", "started_at", "finished_at"))
    depth = []
    for moment in edges[1:]:  # at each bucket's end: submitted by then, not yet started nor ended
        depth.append(float(sum(1 for submitted, started, finished in rows
                               if submitted <= moment and (started is None or started > moment)
                               and (finished is None or finished > moment))))
    return depth


def _utilisation(edges: list[datetime], now: datetime) -> list[Series]:
    start, end = edges[0], edges[-1]
    spans: dict[int, list[tuple[datetime, datetime]]] = {}
    for worker_id, began, ended in (Partition.objects.filter(worker__isnull=False, gpu_started_at__lt=end)
                                    .filter(Q(gpu_finished_at__isnull=True) | Q(gpu_finished_at__gt=start))
                                    .values_list("worker_id", "gpu_started_at", "gpu_finished_at")):
        spans.setdefault(worker_id, []).append((began, ended or now))
    out = []
    for worker in Worker.objects.select_related("host").filter(pk__in=spans).order_by("host__name", "device", "ordinal"):
        busy = [0.0] * (len(edges) - 1)
        for began, ended in spans[worker.pk]:
            for i in range(len(edges) - 1):
                overlap = (min(ended, edges[i + 1]) - max(began, edges[i])).total_seconds()
                if overlap > 0:
                    busy[i] += overlap
        width = (edges[1] - edges[0]).total_seconds()
        out.append(Series(f"{worker.host.name} {worker.device} W{worker.ordinal} utilisation", "%",
                          [min(100.0, 100 * b / width) for b in busy]))
    return out


def read_history(window: str, now: datetime) -> tuple[list[datetime], list[Series]]:
    span, buckets = WINDOWS[window]
    edges = _edges(now, span, buckets)
    ended = list(ProofJob.objects.filter(finished_at__gte=edges[0]).values_list("finished_at", "state"))
    series = [
        Series("proofs per minute", "/min", _per_minute([t for t, s in ended if s == JobState.DONE], edges)),
        Series("failures per minute", "/min", _per_minute([t for t, s in ended if s == JobState.FAILED], edges)),
        Series("queue depth", "jobs", _queue_depth(edges)),
        *_utilisation(edges, now),
    ]
    return edges, series


def svg(series: Series, edges: list[datetime], dom_id: str) -> str:
    """One bar chart with a time axis: a bar per bucket, the peak labelled."""
    top = max(series.values, default=0.0) or 1.0
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = plot_w / max(1, len(series.values))
    bars = "".join(
        f'<rect class="bar" x="{PAD + i * step:.1f}" y="{PAD + plot_h * (1 - v / top):.1f}" '
        f'width="{max(step - 1, 1):.1f}" height="{plot_h * v / top:.1f}"><title>{edges[i]:%H:%M} {v:.2f}</title></rect>'
        for i, v in enumerate(series.values) if v > 0)
    ticks = "".join(
        f'<text class="tick" x="{PAD + i * step:.1f}" y="{HEIGHT - 8}">{edges[i].astimezone():%H:%M}</text>'
        for i in range(0, len(series.values), max(1, len(series.values) // 6)))
    return (f'<svg id="{escape(dom_id)}" class="history" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(series.title)}"><text class="title" x="{PAD}" y="16">{escape(series.title)} '
            f'(peak {max(series.values, default=0.0):.2f} {escape(series.unit)})</text>'
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
    charts = [svg(s, edges, f"history-{i}") for i, s in enumerate(series)]
    return render(request, "console/history.html", {"charts": charts, "window": window, "windows": list(WINDOWS)})
