"""The GPU phases a worker's utilisation is measured over, read for /status, /metrics, the task
stream and /history/; utilisation itself is defined once, in engine.figures (UTILISATION).

A worker is busy while one of its partitions is between ``gpu_started_at`` and
``gpu_finished_at``. An interval without an end is open only while its partition is still in
``gpu`` (it runs to now); any other way out of ``gpu`` writes the end (ledger.claims.
close_gpu_interval), and a row from before that rule ends at its partition's end, so a
partition cancelled on the GPU never counts as busy for ever.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db.models import Q

from engine.figures import Span, gpu_span
from engine.models import Partition
from engine.states import PartitionState
from engine.status.prepared import Prepared

# The window /status, /metrics and the task stream measure over, and the step its start is
# rounded down to for its query (compiled once a step).
WINDOW_SECONDS = 300
STEP_SECONDS = 5


class PhaseRow(NamedTuple):
    """A partition's GPU phase on a live worker."""

    worker: int  # the worker's pk
    number: int  # the partition's index in its job
    job_id: str
    kind: str
    gpu_started_at: datetime
    gpu_finished_at: datetime | None
    state: str
    finished_at: datetime | None

    def span(self, now: datetime) -> Span | None:
        return gpu_span(self.gpu_started_at, self.gpu_finished_at, self.state == PartitionState.GPU, self.finished_at,
                        now)


# Every live worker's GPU phases that may touch the window: ended since its rounded start
# (or, for a row without its end, whose partition ended since), or still on the GPU. Those
# that ended before the exact start add nothing when summed.
GPU_PHASES = Prepared(lambda since: (
    Partition.objects.filter(worker__host__stopped_at__isnull=True, gpu_started_at__isnull=False)
    .filter(Q(gpu_finished_at__gte=since) | Q(gpu_finished_at__isnull=True, state=PartitionState.GPU)
            | Q(gpu_finished_at__isnull=True, finished_at__gte=since))
    .order_by("gpu_started_at")
    .values_list("worker", "index", "job__job_id", "job__kind", "gpu_started_at", "gpu_finished_at", "state",
                 "finished_at")), PhaseRow)


def window_start(now: datetime) -> datetime:
    return now - timedelta(seconds=WINDOW_SECONDS)


def phases_by_worker(now: datetime) -> dict[int, list[PhaseRow]]:
    """GPU_PHASES for the window ending now, by worker id."""
    since = datetime.fromtimestamp((now.timestamp() - WINDOW_SECONDS) // STEP_SECONDS * STEP_SECONDS, tz=now.tzinfo)
    by_worker: dict[int, list[PhaseRow]] = {}
    for row in GPU_PHASES.rows(since):
        by_worker.setdefault(row.worker, []).append(row)
    return by_worker


def spans_of(phases: Iterable[PhaseRow], now: datetime) -> list[Span]:
    """The GPU spans of GPU_PHASES rows."""
    spans = (row.span(now) for row in phases)
    return [span for span in spans if span is not None]
