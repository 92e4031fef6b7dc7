"""The history page: the series of a range (engine.status.history) as bar charts drawn by the
page's template in SVG (no JavaScript, no chart library), and the range's throughput and cost
per kind and per host (engine.status.stats), read in one snapshot: the figures
``GET /api/v1/history`` and ``GET /api/v1/stats`` give for the same range.

A range is the last hour, 6 hours, day or week, or ``since``/``until`` (ISO 8601) with
``buckets``; each chart's axes are labelled (time, and the series' unit up to its top), and
its peak (the largest bucket) and mean (over the range) are named as such.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine.console.auth import require_viewer
from engine.figures import LEGEND, PHASES
from engine.format import fmt_moment, fmt_ms
from engine.status.history import LEVEL, MAX_BUCKETS, RATE, History, Series, read_history
from engine.status.read import one_snapshot
from engine.status.stats import stats

# (span, buckets, label): a bucket of 1, 5, 15 and 60 minutes
WINDOWS = {
    "hour": (timedelta(hours=1), 60, "hour"),
    "6h": (timedelta(hours=6), 72, "6 hours"),
    "day": (timedelta(days=1), 96, "day"),
    "week": (timedelta(days=7), 168, "7 days"),
}
WIDTH, HEIGHT = 1200, 170
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40  # room for the axes' labels


def _figure(value: float, counts: bool) -> str:
    return f"{value:.0f}" if counts else f"{value:.2f}"


def _moment(text: str) -> datetime | None:
    value = parse_datetime(text) if text else None
    if value is None:
        return None
    return (value if timezone.is_aware(value) else value.replace(tzinfo=UTC)).astimezone(UTC)


def chart(series: Series, history: History, dom_id: str) -> dict[str, Any]:
    """One chart's geometry and words for the template: a bar per bucket (for a count of
    things at once the most at any moment, with the bucket's mean drawn inside it), the axes
    and their labels, the peak and the mean."""
    top = series.peak or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = len(series.values)
    step = plot_w / max(1, n)
    means = series.means or (None,) * n
    bars = []
    for i, (value, mean) in enumerate(zip(series.values, means, strict=True)):
        if value <= 0:
            continue
        label = _figure(value, series.counts)
        title = (f"{history.edges[i]:%H:%M} {label} {series.unit} at most, {mean:.1f} on average"
                 if mean is not None else f"{history.edges[i]:%H:%M} {label} {series.unit}")
        bar = {"x": f"{LEFT + i * step:.1f}", "y": f"{TOP + plot_h * (1 - value / top):.1f}",
               "width": f"{max(step - 1, 1):.1f}", "height": f"{plot_h * value / top:.1f}", "title": title,
               "value": value}
        if mean:
            bar.update(mean_y=f"{TOP + plot_h * (1 - mean / top):.1f}", mean_height=f"{plot_h * mean / top:.1f}")
        bars.append(bar)
    every = max(1, n // 8)
    ticks = [{"x": f"{LEFT + i * step:.1f}", "label": f"{history.edges[i]:%d %H:%M}"} for i in range(0, n, every)]
    peak_words = {RATE: "busiest bucket", LEVEL: "most at once", "share": "busiest bucket"}[series.measure]
    mean_words = "mean over the range" if series.measure != LEVEL else "time-weighted mean over the range"
    return {
        "dom_id": dom_id, "name": series.name, "unit": series.unit, "bars": bars, "ticks": ticks,
        "peak": _figure(series.peak, series.counts), "mean": f"{series.mean:.2f}", "peak_words": peak_words,
        "mean_words": mean_words, "top": _figure(top, series.counts), "width": WIDTH, "height": HEIGHT,
        "left": LEFT, "right": WIDTH - RIGHT, "axis_y": TOP + plot_h, "top_y": TOP, "label_y": HEIGHT - 6,
        "tick_y": TOP + plot_h + 16, "mid_y": TOP + plot_h / 2,
        "bucket": fmt_ms(history.bucket_seconds * 1000), "level": series.measure == LEVEL,
    }


def _range(params: Any, now: datetime) -> tuple[str, datetime, datetime, int, str]:
    """The window key (or "range"), since, until, buckets, and what the page says of it."""
    since, until = _moment(str(params.get("since", ""))), _moment(str(params.get("until", "")))
    if since is not None and until is not None and since < until:
        buckets = str(params.get("buckets", ""))
        count = min(int(buckets), MAX_BUCKETS) if buckets.isdigit() and int(buckets) > 0 else 60
        return "range", since, until, count, f"{fmt_moment(since)} – {fmt_moment(until)}"
    window = str(params.get("window", "hour"))
    window = window if window in WINDOWS else "hour"
    span, count, label = WINDOWS[window]
    return window, now - span, now, count, f"last {label}"


@login_required
def history_page(request: HttpRequest) -> HttpResponse:
    require_viewer(request)
    with one_snapshot():
        now = timezone.now()
        window, since, until, buckets, said = _range(request.GET, now)
        history = read_history(since, until, buckets, now=min(now, until))
        figures = stats(since, until)
    charts = [chart(s, history, f"history-{i}") for i, s in enumerate(history.series)]
    windows = [(key, label) for key, (_, _, label) in WINDOWS.items()]
    return render(request, "console/history.html", {
        "charts": charts, "window": window, "windows": windows, "range": said, "since": since, "until": until,
        "phases": [f.name for f in PHASES], "figure_legend": LEGEND,
        "kinds": [_throughput_row(row["kind"], row) for row in figures["kinds"]],
        "hosts": [_throughput_row(row["host"], row) for row in figures["hosts"]]})


def _throughput_row(name: str, row: dict[str, Any]) -> dict[str, Any]:
    """One line of the throughput table, its figures as the page prints them."""
    phases = [(fmt_ms(p["mean_ms"]), fmt_ms(p["p95_ms"])) for p in (row["phases"][f.name] for f in PHASES)]
    busy = row.get("device_busy")
    return {"name": name, "proofs": row["proofs"], "partitions": row["partitions"],
            "proofs_per_hour": f"{row['proofs_per_hour']:.1f}", "partitions_per_hour": f"{row['partitions_per_hour']:.1f}",
            "phases": phases, "device_busy": f"{busy:.1%}" if busy is not None else "—",
            "cost_per_proof": _money(row["cost_per_proof"]), "cost_per_hour": _money(row.get("cost_per_hour"))}


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"
