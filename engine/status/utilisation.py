"""A GPU worker's utilisation, defined once for /status, /metrics, the task stream and /history/.

A worker is busy while one of its partitions is between ``gpu_started_at`` and
``gpu_finished_at``. An interval without an end is open only while its partition is still in
``gpu`` (it runs to now); any other way out of ``gpu`` writes the end (ledger.claims.
close_gpu_interval), and a row from before that rule ends at its partition's end, so a
partition cancelled on the GPU never counts as busy for ever. Utilisation over a window is
the busy time inside it over the time observed, and the observation starts no earlier than
the host's start: work from before a restart is not divided by the uptime since it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from engine.models import Partition
from engine.states import PartitionState
from engine.status.prepared import Prepared

Span = tuple[datetime, datetime]

# The window /status, /metrics and the task stream measure over, and the step its start is
# rounded down to for its query (compiled once a step).
WINDOW_SECONDS = 300
STEP_SECONDS = 5

# Every live worker's GPU phases that may touch the window: ended since its rounded start
# (or, for a row without its end, whose partition ended since), or still on the GPU. Those
# that ended before the exact start add nothing when summed.
GPU_PHASES = Prepared(lambda since: (
    Partition.objects.filter(worker__host__stopped_at__isnull=True, gpu_started_at__isnull=False)
    .filter(Q(gpu_finished_at__gte=since) | Q(gpu_finished_at__isnull=True, state=PartitionState.GPU)
            | Q(gpu_finished_at__isnull=True, finished_at__gte=since))
    .order_by("gpu_started_at")
    .values_list("worker", "index", "job__job_id", "job__kind", "gpu_started_at", "gpu_finished_at", "state",
                 "finished_at")))


def window_start(now: datetime) -> datetime:
    return now - timedelta(seconds=WINDOW_SECONDS)


def phases_by_worker(now: datetime) -> dict[int, list[tuple[Any, ...]]]:
    """GPU_PHASES for the window ending now, by worker id."""
    since = datetime.fromtimestamp((now.timestamp() - WINDOW_SECONDS) // STEP_SECONDS * STEP_SECONDS, tz=now.tzinfo)
    by_worker: dict[int, list[tuple[Any, ...]]] = {}
    for row in GPU_PHASES.rows(since):
        by_worker.setdefault(row[0], []).append(row)
    return by_worker


def spans_of(phases: Iterable[tuple[Any, ...]], now: datetime) -> list[Span]:
    """The GPU spans of GPU_PHASES rows."""
    spans = (gpu_span(row[4], row[5], row[6], row[7], now) for row in phases)
    return [span for span in spans if span is not None]


def gpu_span(started: datetime, finished: datetime | None, state: str, ended: datetime | None,
             now: datetime) -> Span | None:
    """A partition's GPU interval, or None when it has none to count."""
    if finished is None:
        finished = now if state == PartitionState.GPU else ended
    if finished is None or finished <= started:
        return None
    return started, finished


def busy_seconds(spans: Iterable[Span], start: datetime, end: datetime) -> float:
    """Seconds of [start, end) inside the spans (a worker's spans never overlap)."""
    return sum(max(0.0, (min(b, end) - max(a, start)).total_seconds()) for a, b in spans)


def utilisation(spans: Iterable[Span], window_start: datetime, now: datetime,
                host_started: datetime | None) -> float:
    """Busy share of the window since the host started, in [0, 1]."""
    since = max(host_started or window_start, window_start)
    observed = (now - since).total_seconds()
    if observed <= 0:
        return 0.0
    return min(1.0, busy_seconds(spans, since, now) / observed)
