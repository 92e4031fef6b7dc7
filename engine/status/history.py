"""History, not only five minutes: series over a range of buckets, read from the records in one
snapshot, for /history/ and ``GET /api/v1/history`` (the same read, so the same figures).

Every series is derived from timestamps the records already keep:

- proofs per minute: jobs done, in the bucket of their end;
- failures per minute: every failed attempt of a partition, in the bucket it ended in, whether
  it was retried after or not (its partition's kept attempts, engine.figures: a lapsed lease is
  a failure, a hand-back is not), so a job retried after a failure still counts it;
- queue depth: jobs waiting for their first claim (engine.figures.JOB_QUEUE's interval), and
  active partitions: claimed attempts, from their claim to their end; for each bucket the
  most at any moment inside it ("peak") and their time-weighted mean (a sample at the
  bucket's end missed every burst shorter than a bucket);
- each worker's utilisation in each bucket: engine.figures.UTILISATION over that bucket,
  observed whole (a host's latest start does not hide what its earlier runs did).

A series' "peak" is its largest bucket, its "mean" the mean over the whole range.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Q
from django.utils.dateparse import parse_datetime

from engine import figures
from engine.figures import Span
from engine.models import Partition, ProofJob, Worker
from engine.states import JobState, PartitionState
from engine.status.read import one_snapshot

MAX_BUCKETS = 500

# How a series is measured per bucket.
RATE = "rate"  # events per minute
LEVEL = "level"  # things at once: the most at any moment (values) and the time-weighted mean (means)
SHARE = "share"  # a percentage of the bucket


@dataclass(frozen=True)
class Series:
    name: str
    unit: str
    measure: str
    values: tuple[float, ...]  # per bucket: a rate, the most at once, or a share
    means: tuple[float, ...] | None = None  # LEVEL: the time-weighted mean per bucket
    counts: bool = False  # whole numbers: labelled without decimals

    @property
    def peak(self) -> float:
        """The largest bucket's figure."""
        return max(self.values, default=0.0)

    @property
    def mean(self) -> float:
        """The mean over the range: of the time-weighted means for a LEVEL, of the buckets else."""
        per_bucket = self.means if self.means is not None else self.values
        return sum(per_bucket) / len(per_bucket) if per_bucket else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "measure": self.measure, "values": list(self.values),
                "means": list(self.means) if self.means is not None else None, "peak": self.peak, "mean": self.mean}


@dataclass(frozen=True)
class History:
    since: datetime
    until: datetime
    edges: tuple[datetime, ...]  # buckets + 1 moments, since … until
    series: tuple[Series, ...]

    @property
    def bucket_seconds(self) -> float:
        return (self.until - self.since).total_seconds() / (len(self.edges) - 1)

    def as_json(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "buckets": len(self.edges) - 1,
                "bucket_seconds": self.bucket_seconds, "edges": list(self.edges),
                "series": [s.as_json() for s in self.series]}


# ---- the rows -------------------------------------------------------------------------------


class EndedJobRow(NamedTuple):
    finished_at: datetime
    state: str


class WaitingJobRow(NamedTuple):
    submitted_at: datetime
    retried_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    def wait(self, now: datetime) -> Span | None:
        """engine.figures.JOB_QUEUE's interval: queued until its first claim (or its end)."""
        start = self.retried_at or self.submitted_at  # engine.figures.queue_start
        end = self.started_at if self.started_at is not None and self.started_at >= start else None
        end = end or self.finished_at or now
        return (start, end) if end > start else None


class AttemptRow(NamedTuple):
    """A partition of a job alive in the range: its current attempt and those it kept."""

    state: str
    claimed_at: datetime | None
    finished_at: datetime | None
    attempts: list[Any]  # JSON: engine.ledger.claims.release_claim

    def kept(self) -> list[KeptAttempt]:
        return [KeptAttempt.from_json(a) for a in self.attempts if isinstance(a, dict)]


class KeptAttempt(NamedTuple):
    """An ended attempt as its partition kept it."""

    claimed_at: datetime | None
    ended_at: datetime | None
    ended: str

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> KeptAttempt:
        return cls(_moment(entry.get("claimed_at")), _moment(entry.get("ended_at")), str(entry.get("ended") or ""))

    @property
    def failed(self) -> bool:
        return self.ended in FAILED_ENDINGS


# How kept attempts ended that count as failures (engine.ledger.claims.release_claim's "ended").
FAILED_ENDINGS = frozenset({"failed", "lapsed"})


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


class GpuRow(NamedTuple):
    worker: int
    gpu_started_at: datetime
    gpu_finished_at: datetime | None
    state: str
    finished_at: datetime | None

    def span(self, now: datetime) -> Span | None:
        return figures.gpu_span(self.gpu_started_at, self.gpu_finished_at, self.state == PartitionState.GPU,
                                self.finished_at, now)


class WorkerRow(NamedTuple):
    pk: int
    host: str
    device: str
    ordinal: int


# ---- the series -----------------------------------------------------------------------------


def edges_of(since: datetime, until: datetime, buckets: int) -> tuple[datetime, ...]:
    step = (until - since) / buckets
    return tuple(since + step * i for i in range(buckets)) + (until,)


def _bucket(moment: datetime, edges: tuple[datetime, ...]) -> int | None:
    if moment < edges[0] or moment >= edges[-1]:
        return None
    step = (edges[-1] - edges[0]) / (len(edges) - 1)
    return min(len(edges) - 2, int((moment - edges[0]) / step))


def per_minute(moments: Iterable[datetime], edges: tuple[datetime, ...]) -> tuple[float, ...]:
    counts = [0.0] * (len(edges) - 1)
    for moment in moments:
        index = _bucket(moment, edges)
        if index is not None:
            counts[index] += 1
    minutes = (edges[1] - edges[0]).total_seconds() / 60
    return tuple(c / minutes for c in counts)


def concurrency(intervals: Iterable[Span], edges: tuple[datetime, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per bucket, how many of the intervals were open at once at most, and on average over
    the bucket's time. One sweep over their starts and ends (an end sorts before a start at
    the same moment: a job handed on is not counted twice)."""
    spans = [(a, b) for a, b in intervals if b > a]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
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
    return tuple(peaks), tuple(means)


def _alive(since: datetime, until: datetime) -> Q:
    """Jobs alive at some moment of [since, until): submitted before its end, not ended before its start."""
    return Q(job__submitted_at__lt=until) & (Q(job__finished_at__isnull=True) | Q(job__finished_at__gte=since))


def read_history(since: datetime, until: datetime, buckets: int, now: datetime | None = None) -> History:
    """The range's series in ``buckets`` buckets, read in one snapshot (the caller's, if inside
    one). ``now`` ends what is still open (default: ``until``)."""
    now = now or until
    edges = edges_of(since, until, buckets)
    with one_snapshot():
        ended = [EndedJobRow._make(r) for r in ProofJob.objects.filter(finished_at__gte=since, finished_at__lt=until)
                 .values_list("finished_at", "state")]
        waiting = [WaitingJobRow._make(r) for r in ProofJob.objects.filter(submitted_at__lt=until)
                   .filter(Q(started_at__isnull=True) | Q(started_at__gt=since))
                   .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
                   .values_list("submitted_at", "retried_at", "started_at", "finished_at")]
        attempts = [AttemptRow._make(r) for r in Partition.objects.filter(_alive(since, until))
                    .filter(Q(claimed_at__isnull=False) | Q(state=PartitionState.FAILED) | ~Q(attempts=[]))
                    .values_list("state", "claimed_at", "finished_at", "attempts")]
        gpu = [GpuRow._make(r) for r in Partition.objects.filter(worker__isnull=False, gpu_started_at__lt=until)
               .filter(Q(gpu_finished_at__isnull=True) | Q(gpu_finished_at__gt=since))
               .values_list("worker_id", "gpu_started_at", "gpu_finished_at", "state", "finished_at")]
        workers = [WorkerRow._make(r) for r in Worker.objects.filter(pk__in={row.worker for row in gpu})
                   .order_by("host__name", "device", "ordinal").values_list("pk", "host__name", "device", "ordinal")]
    failures: list[datetime] = []
    active: list[Span] = []
    for row in attempts:
        if row.state == PartitionState.FAILED and row.finished_at is not None:
            failures.append(row.finished_at)
        if row.claimed_at is not None:
            active.append((row.claimed_at, row.finished_at or now))
        for kept in row.kept():
            if kept.failed and kept.ended_at is not None:
                failures.append(kept.ended_at)
            if kept.claimed_at is not None and kept.ended_at is not None:
                active.append((kept.claimed_at, kept.ended_at))
    series = [
        Series("proofs per minute", "/min", RATE, per_minute((r.finished_at for r in ended if r.state == JobState.DONE),
                                                              edges)),
        Series("failures per minute", "/min", RATE, per_minute(failures, edges)),
        Series("queue depth", "jobs", LEVEL, *concurrency((w for r in waiting if (w := r.wait(now))), edges),
               counts=True),
        Series("active partitions", "partitions", LEVEL, *concurrency(active, edges), counts=True),
        *_utilisation(gpu, workers, edges, now),
    ]
    return History(since, until, edges, tuple(series))


def _utilisation(gpu: list[GpuRow], workers: list[WorkerRow], edges: tuple[datetime, ...],
                 now: datetime) -> list[Series]:
    spans: dict[int, list[Span]] = {}
    for row in gpu:
        span = row.span(now)
        if span is not None:
            spans.setdefault(row.worker, []).append(span)
    out = []
    for worker in workers:
        if worker.pk not in spans:
            continue
        shares = tuple(100 * figures.utilisation(spans[worker.pk], edges[i], edges[i + 1])
                       for i in range(len(edges) - 1))
        out.append(Series(f"{worker.host} {worker.device} W{worker.ordinal} utilisation", "%", SHARE, shares))
    return out
