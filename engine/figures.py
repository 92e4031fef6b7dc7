"""Every figure the farm shows, defined once: what each name counts, and the one function that
computes it. The job page, the jobs page, the API, /status, /metrics, /history/, /api/v1/stats,
/capacity/ and the engines' log lines all take their durations, utilisation and device busy
from here, so a name means one number wherever it is read.

A partition's life is a series of attempts (a claim each). An attempt's figures come from its
own records: it is queued from the job's submission (its first attempt) or from the moment it
was put back in the queue (a failed attempt retried, a lapsed lease, a hand-back, an operator's
retry: ``Partition.requeued_at``), claimed (``claimed_at``), synthesized, proved on a worker and
finalized. Each ended attempt's times are kept on the partition (``Partition.attempts``), so a
retried partition's earlier attempts are shown as they were, and its current figures are its
current attempt's alone.

Where two measures are worth showing they have two names: ``gpu`` is the recorded phase on a
worker (its wait for the device's lock included), ``device`` the time the partition held the
device (the capacity model's service time); ``synthesis``, ``gpu`` and ``finalize`` come from
the records, while the engine's log line also says what it timed inside its own process around
the work alone (``synthesis run``, ``launch``, ``finish``).

No Django here: plain functions of timestamps, importable by every layer from the ledger up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.format import ms_between

Span = tuple[datetime, datetime]


@dataclass(frozen=True)
class Figure:
    """A figure's name (as pages, the legend, the log lines, /metrics' ``phase`` label and
    /api/v1/stats' phases say it), the JSON field that carries it, and what it counts."""

    name: str
    field: str
    counts: str


QUEUE = Figure("queue", "queue_ms", "from the attempt's own queueing (the job's submission for a first attempt; the "
                                    "moment it was requeued after a failure, a lapsed lease, a hand-back or an "
                                    "operator's retry) to its claim by a host")
RESERVE = Figure("reserve", "reserve_ms", "from the claim to the start of synthesis: the host getting the proving key "
                                          "and the memory")
SYNTHESIS = Figure("synthesis", "synth_ms", "recorded synthesizing to recorded synthesized: the run in a synthesis "
                                            "process with its hand-over (the cells' \"synth\")")
GPU = Figure("gpu", "gpu_ms", "recorded on a GPU worker to recorded finalizing: the launch, and the wait for the "
                              "device's lock before it")
FINALIZE = Figure("finalize", "finalize_ms", "recorded finalizing to recorded done: the wait for a finalizer, the "
                                             "CPU-side finish, verification and the record")
TOTAL = Figure("total", "total_ms", "a job: its submission to its end (total_secs); a partition's attempt: its "
                                    "queueing to its end")
JOB_QUEUE = Figure("job queue", "queue_secs", "a job's submission, or its operator's latest retry, to its first "
                                              "claim since")
JOB_RUN = Figure("run", "p50_s", "a job's first claim (since its latest retry) to its end: what its deadline expects "
                                 "of its circuit (/api/v1/stats' circuits)")
DEVICE = Figure("device", "device_p50_s", "the time a partition held its device: its gpu time less the wait for the "
                                          "device's lock (from the order the device's partitions left it)")
UTILISATION = Figure("utilisation", "utilisation", "a GPU worker's share of the observed window it had a partition "
                                                   "on the GPU (a live window is observed from the host's start)")
DEVICE_BUSY = Figure("device busy", "device_busy", "a host's share of the range its devices had at least one "
                                                   "partition on them, averaged over its devices")
# What the capacity replay predicts for a farm, beside what was measured: a model's figures under
# names of their own (its "(now)" row is the model of the current farm, not a measurement).
MODELLED_JOB_QUEUE = Figure("modelled job queue", "claim_wait", "the job queue the capacity replay predicts on that "
                                                             "farm: the range's recorded arrivals run through a model "
                                                             "of its hosts with the service times listed")
MODELLED_TOTAL = Figure("modelled total", "done_wait", "a job's total as the same replay predicts it on that farm")
# Timed inside the engine's own process around the work alone; its log line says them.
SYNTHESIS_RUN = Figure("synthesis run", "synth_s", "inside the synthesis process: the circuit's synthesis alone")
LAUNCH = Figure("launch", "gpu_s", "inside the proving worker, holding the device's lock: the kernels' launch")
FINISH = Figure("finish", "finish_s", "inside the finalizer: waiting for the kernels and the CPU-side finish, "
                                      "before verification")

# The phases of one attempt, in order, as tables and histograms list them.
PHASES: tuple[Figure, ...] = (QUEUE, RESERVE, SYNTHESIS, GPU, FINALIZE)
LEGEND: tuple[Figure, ...] = (*PHASES, TOTAL, JOB_QUEUE, JOB_RUN, DEVICE, UTILISATION, DEVICE_BUSY, SYNTHESIS_RUN, LAUNCH,
                              FINISH)


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start and end else None


@dataclass(frozen=True)
class AttemptTimes:
    """One attempt's recorded moments. ``queued_at``: when this attempt was queued (None: since
    its job's submission, ``submitted_at``)."""

    submitted_at: datetime | None
    queued_at: datetime | None
    claimed_at: datetime | None
    synth_started_at: datetime | None
    synth_finished_at: datetime | None
    gpu_started_at: datetime | None
    gpu_finished_at: datetime | None
    finished_at: datetime | None

    @property
    def queue_start(self) -> datetime | None:
        return self.queued_at or self.submitted_at

    def bounds(self, figure: Figure) -> tuple[datetime | None, datetime | None]:
        """Where ``figure`` (a phase, or total) starts and ends for this attempt."""
        start, end = MOMENTS[figure.name]
        return getattr(self, start), getattr(self, end)

    def ms(self, figure: Figure) -> int | None:
        return ms_between(*self.bounds(figure))

    def seconds(self, figure: Figure) -> float | None:
        return seconds_between(*self.bounds(figure))


# Each phase's (and an attempt's total's) first and last moment, as AttemptTimes (and the
# partition's columns) name them; "queue_start" is the attempt's requeue, else its job's submission.
MOMENTS: dict[str, tuple[str, str]] = {
    QUEUE.name: ("queue_start", "claimed_at"),
    RESERVE.name: ("claimed_at", "synth_started_at"),
    SYNTHESIS.name: ("synth_started_at", "synth_finished_at"),
    GPU.name: ("gpu_started_at", "gpu_finished_at"),
    FINALIZE.name: ("gpu_finished_at", "finished_at"),
    TOTAL.name: ("queue_start", "finished_at"),
}


def percentile[N: (int, float)](values: Sequence[N], q: float) -> N:
    """The q-th percentile by the nearest-rank rule (one of the values, never interpolated):
    every p50 and p95 the farm shows."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def p50[N: (int, float)](values: Sequence[N]) -> N:
    return percentile(values, 50)


def p95[N: (int, float)](values: Sequence[N]) -> N:
    return percentile(values, 95)


def queue_start(queued_at: datetime | None, submitted_at: datetime | None) -> datetime | None:
    """When an attempt (or a job) was queued: its own requeue or retry, else its submission."""
    return queued_at or submitted_at


def job_queue_ms(submitted_at: datetime | None, retried_at: datetime | None, started_at: datetime | None) -> int | None:
    """JOB_QUEUE: the job's submission (or latest retry) to its first claim since."""
    start = queue_start(retried_at, submitted_at)
    if start is None or started_at is None or started_at < start:
        return None  # not claimed since its retry
    return ms_between(start, started_at)


def job_total_ms(submitted_at: datetime | None, finished_at: datetime | None) -> int | None:
    """TOTAL of a job: its submission to its end."""
    return ms_between(submitted_at, finished_at)


# ---- time on the GPU -------------------------------------------------------------------


def gpu_span(started: datetime, finished: datetime | None, on_gpu: bool, ended: datetime | None,
             now: datetime) -> Span | None:
    """A partition's GPU interval, or None when it has none to count. An interval without its
    end is open only while its partition is still on the GPU (it runs to now); a row from
    before every way out of ``gpu`` wrote the end ends at its partition's end."""
    if finished is None:
        finished = now if on_gpu else ended
    if finished is None or finished <= started:
        return None
    return started, finished


def busy_seconds(spans: Iterable[Span], start: datetime, end: datetime) -> float:
    """Seconds of [start, end) inside the spans (one worker's spans never overlap)."""
    return sum(max(0.0, (min(b, end) - max(a, start)).total_seconds()) for a, b in spans)


def observed_from(window_start: datetime, host_started: datetime | None) -> datetime:
    """A live window is observed from the host's start, if later: work from before a restart
    is not divided by the uptime since it."""
    return max(host_started or window_start, window_start)


def utilisation(spans: Iterable[Span], window_start: datetime, window_end: datetime,
                host_started: datetime | None = None) -> float:
    """UTILISATION: a worker's busy share of the observed window, in [0, 1]."""
    since = observed_from(window_start, host_started)
    observed = (window_end - since).total_seconds()
    if observed <= 0:
        return 0.0
    return min(1.0, busy_seconds(spans, since, window_end) / observed)


def union(spans: Iterable[Span]) -> list[Span]:
    """Overlapping spans merged (several workers sharing one device)."""
    merged: list[Span] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def device_busy(spans_by_device: Sequence[Iterable[Span]], start: datetime, end: datetime) -> float | None:
    """DEVICE_BUSY: the share of [start, end) each device had a partition on it (its workers'
    spans merged), averaged over the devices; None for a host without one."""
    if not spans_by_device:
        return None
    observed = (end - start).total_seconds()
    if observed <= 0:
        return 0.0
    return sum(min(1.0, busy_seconds(union(spans), start, end) / observed) for spans in spans_by_device) / len(
        spans_by_device)


def device_seconds(rows: Sequence[tuple[datetime, datetime]]) -> list[float]:
    """DEVICE of each of one device's GPU intervals (start, end), in the order given: each held
    the device from the later of its start and the previous one's end (in the order they left
    it); that is its time with the device's lock."""
    out = [0.0] * len(rows)
    free_at: datetime | None = None
    for i in sorted(range(len(rows)), key=lambda i: rows[i][1]):
        start, end = rows[i]
        held_from = start if free_at is None else max(start, free_at)
        out[i] = max(0.0, (end - held_from).total_seconds())
        free_at = end
    return out
