"""/metrics' histograms, read from the records: each job's total by kind, and each phase of the
partitions' current attempts by kind (engine.figures: queue, reserve, synthesis, gpu, finalize),
cumulative because the history is kept.

On PostgreSQL the database counts the buckets (a grouped query per phase reads a row per
kind, not the history: 3.8x faster at 20,000 partitions); SQLite, the embedded default with
its short history, subtracts datetimes in a Python function per row and bucket, which is 16x
slower than reading the rows once and counting here. Both count what engine.figures defines:
``tests/api/test_status_metrics.py`` holds them equal.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest

from engine import figures
from engine.figures import MOMENTS, PHASES, AttemptTimes
from engine.models import Partition, ProofJob
from engine.states import JobState

PROOF_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
PHASE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Buckets(NamedTuple):
    """Prometheus' form: the count up to each bound (``le``), +Inf last, and the sum."""

    counts: list[tuple[str, float]]
    seconds: float


def _buckets(bounds: tuple[float, ...], cumulative: Iterable[int], total: int, seconds: float) -> Buckets:
    return Buckets([(repr(b), float(n)) for b, n in zip(bounds, cumulative, strict=False)] + [("+Inf", float(total))],
                   seconds)


class _Tally:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)  # skewed clocks of two hosts count as 0
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def buckets(self) -> Buckets:
        return _buckets(self.bounds, itertools.accumulate(self.counts), sum(self.counts), self.sum)


def _in_database() -> bool:
    return connection.vendor == "postgresql"


def _column(moment: str, prefix: str = "") -> Any:
    """A moment of engine.figures.MOMENTS as a database expression."""
    if moment == "queue_start":
        return Coalesce(F(f"{prefix}requeued_at"), F(f"{prefix}job__submitted_at"))
    return F(f"{prefix}{moment}")


def _counted_by_database(rows: QuerySet[Any], by: str, start: Any, end: Any, bounds: tuple[float, ...]
                         ) -> dict[str, Buckets]:
    took = Greatest(ExpressionWrapper(end - start, output_field=DurationField()),
                    Value(timedelta(0), output_field=DurationField()))
    buckets = {f"le_{i}": Count("pk", filter=Q(took__lte=timedelta(seconds=b))) for i, b in enumerate(bounds)}
    grouped = (rows.annotate(took=took).filter(took__isnull=False)
               .values(by).annotate(n=Count("pk"), total=Sum("took"), **buckets).order_by(by))
    out: dict[str, Buckets] = {}
    for row in grouped:
        seconds = row["total"].total_seconds() if row["total"] is not None else 0.0
        out[row[by]] = _buckets(bounds, (row[f"le_{k}"] for k in range(len(bounds))), row["n"], seconds)
    return out


def proof_histograms() -> dict[str, Buckets]:
    """TOTAL of each job done, by kind: its submission to its end."""
    done = ProofJob.objects.filter(state=JobState.DONE, finished_at__isnull=False)
    if _in_database():
        return _counted_by_database(done, "kind", F("submitted_at"), F("finished_at"), PROOF_BUCKETS)
    tallies: dict[str, _Tally] = defaultdict(lambda: _Tally(PROOF_BUCKETS))
    for kind, submitted, finished in done.values_list("kind", "submitted_at", "finished_at").iterator():
        took = figures.seconds_between(submitted, finished)
        if took is not None:
            tallies[kind].observe(took)
    return {kind: tally.buckets() for kind, tally in sorted(tallies.items())}


class _PhaseRow(NamedTuple):
    kind: str
    submitted_at: datetime
    requeued_at: datetime | None
    claimed_at: datetime | None
    synth_started_at: datetime | None
    synth_finished_at: datetime | None
    gpu_started_at: datetime | None
    gpu_finished_at: datetime | None
    finished_at: datetime | None

    def times(self) -> AttemptTimes:
        return AttemptTimes(self.submitted_at, self.requeued_at, self.claimed_at, self.synth_started_at,
                            self.synth_finished_at, self.gpu_started_at, self.gpu_finished_at, self.finished_at)


def phase_histograms() -> dict[tuple[str, str], Buckets]:
    """Each phase of engine.figures.PHASES over the partitions' current attempts that went
    through it, by (kind, phase)."""
    # every partition an attempt was made on (a row from before claims were recorded: synthesized)
    claimed = Partition.objects.filter(Q(claimed_at__isnull=False) | Q(synth_started_at__isnull=False))
    if _in_database():
        out: dict[tuple[str, str], Buckets] = {}
        for figure in PHASES:
            start, end = MOMENTS[figure.name]
            for kind, buckets in _counted_by_database(claimed, "job__kind", _column(start), _column(end),
                                                      PHASE_BUCKETS).items():
                out[(kind, figure.name)] = buckets
        return out
    tallies: dict[tuple[str, str], _Tally] = defaultdict(lambda: _Tally(PHASE_BUCKETS))
    columns = ("job__kind", "job__submitted_at", "requeued_at", "claimed_at", "synth_started_at", "synth_finished_at",
               "gpu_started_at", "gpu_finished_at", "finished_at")
    for row in claimed.values_list(*columns).iterator():  # one pass for every phase
        phase_row = _PhaseRow._make(row)
        times = phase_row.times()
        for figure in PHASES:
            seconds = times.seconds(figure)
            if seconds is not None:
                tallies[(phase_row.kind, figure.name)].observe(seconds)
    return {key: tally.buckets() for key, tally in sorted(tallies.items())}
