"""The history page: series derived from the records' timestamps, drawn by its template as SVG
with labelled axes, its peak and mean named as such."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from engine.console.history import WINDOWS
from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState
from engine.status.history import History, read_history
from tests.api.test_stats import a_proved_job

pytestmark = pytest.mark.django_db


def finished(job_id: str, state: str, minutes_ago: float) -> ProofJob:
    """A job of one partition that ended ``minutes_ago`` as ``state`` (its partition too)."""
    job, _ = submit_job(kind="winning-post", job_id=job_id, inputs={}, num_partitions=1)
    at = timezone.now() - timedelta(minutes=minutes_ago)
    ProofJob.objects.filter(pk=job.pk).update(state=state, submitted_at=at - timedelta(seconds=30),
                                              started_at=at - timedelta(seconds=20), finished_at=at)
    Partition.objects.filter(job=job).update(state=state, claimed_at=at - timedelta(seconds=20), finished_at=at)
    return job


def history(window: str = "hour", now: datetime | None = None) -> History:
    span, buckets, _ = WINDOWS[window]
    now = now or timezone.now()
    return read_history(now - span, now, buckets)


def by_title(window: str = "hour") -> dict[str, tuple[float, ...]]:
    return {s.name: s.values for s in history(window).series}


def test_proofs_and_failures_land_in_the_minute_they_finished() -> None:
    finished("a", JobState.DONE, 10.5)
    finished("b", JobState.DONE, 10.5)
    finished("c", JobState.FAILED, 30.5)
    series = by_title()
    assert sum(series["proofs per minute"]) == 2 and max(series["proofs per minute"]) == 2
    assert sum(series["failures per minute"]) == 1


def test_a_job_retried_after_a_failure_counts_the_failure_and_its_proof() -> None:
    from engine.ledger.writer import StatusWriter, Transition
    from tests.engine.conftest import walk

    writer = StatusWriter(EngineHost.objects.create(name="host-a"))
    submit_job(kind="winning-post", job_id="retried", inputs={}, num_partitions=1)
    [claim] = writer.claim(1)
    writer.apply(Transition(claim, PartitionState.FAILED, reason="device lost", retryable=True))  # requeued
    [again] = writer.claim(1)
    walk(writer, again, PartitionState.SYNTHESIZING, PartitionState.SYNTH_DONE, PartitionState.GPU,
         PartitionState.FINALIZING, PartitionState.DONE)
    assert ProofJob.objects.get(job_id="retried").state == JobState.DONE
    series = by_title()
    assert sum(series["failures per minute"]) == 1 and sum(series["proofs per minute"]) == 1
    # both attempts were active partitions, one after the other
    assert max(series["active partitions"]) == 1


def test_queue_depth_counts_jobs_waiting_at_each_moment() -> None:
    job, _ = submit_job(kind="porep-c2", job_id="waiting", inputs={}, num_partitions=1)
    ProofJob.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    depth = by_title()["queue depth"]
    assert depth[-1] == 1 and depth[-10] == 0


def burst(n: int, minutes_ago: int, now: datetime) -> None:
    """n jobs submitted together that all started 20 s later, inside one of the hour's minute buckets.

    The buckets run from `now`, not from the clock's minutes: a burst placed by the clock straddled
    two buckets whenever `now` fell in its first 25 s."""
    at = now - timedelta(minutes=minutes_ago, seconds=-5)
    for i in range(n):
        job, _ = submit_job(kind="porep-c2", job_id=f"burst-{i}", inputs={}, num_partitions=1)
        ProofJob.objects.filter(pk=job.pk).update(state=JobState.DONE, submitted_at=at, started_at=at + timedelta(seconds=20),
                                                  finished_at=at + timedelta(seconds=30))


def test_a_burst_shorter_than_a_bucket_shows_at_its_peak_and_its_mean() -> None:
    # sampled at each bucket's end, 28 jobs waiting for 20 s showed as none (or "peak 4.00")
    burst(28, 20, now := timezone.now())
    (depth,) = [s for s in history("hour", now).series if s.name == "queue depth"]
    assert max(depth.values) == 28
    assert depth.means is not None and max(depth.means) == pytest.approx(28 * 20 / 60, rel=0.2)


def test_a_chart_names_its_peak_and_its_mean_and_labels_both_axes(staff: Client) -> None:
    burst(28, 20, timezone.now())
    html = staff.get("/history/?window=hour").content.decode()
    chart = html[html.index('aria-label="queue depth"'):]
    chart = chart[:chart.index("</svg>")]
    # a count's peak is a whole number; its mean is the range's, and both are said to be so
    assert "queue depth — peak 28 jobs (most at once), mean " in chart and "(time-weighted mean over the range)" in chart
    assert 'data-axis-top>28</text>' in chart and ">jobs</text>" in chart  # the value axis: its top and its unit
    assert "time (day hour:minute, UTC), buckets of 1m 00s" in chart


def test_active_partitions_count_the_claimed_ones_at_most_and_on_average() -> None:
    job, _ = submit_job(kind="porep-c2", job_id="three", inputs={}, num_partitions=3)
    at = (timezone.now() - timedelta(minutes=15)).replace(second=0, microsecond=0)
    Partition.objects.filter(job=job).update(state=PartitionState.DONE, claimed_at=at,
                                             finished_at=at + timedelta(seconds=30))
    (active,) = [s for s in history().series if s.name == "active partitions"]
    assert max(active.values) == 3
    assert active.means is not None and sum(active.means) == pytest.approx(1.5, rel=0.05)  # 3 × 30 s of 60 s


@pytest.mark.parametrize("window, label", [("hour", "hour"), ("6h", "6 hours"), ("day", "day"), ("week", "7 days")])
def test_every_range_draws_its_charts(staff: Client, window: str, label: str) -> None:
    html = staff.get(f"/history/?window={window}").content.decode()
    assert f"<b>last {label}</b>" in html and 'aria-label="active partitions"' in html


def test_a_worker_busy_for_half_a_minute_shows_half_of_that_bucket() -> None:
    host = EngineHost.objects.create(name="h")
    worker = Worker.objects.create(host=host, device="cpu", ordinal=0)
    job, _ = submit_job(kind="porep-c2", job_id="busy", inputs={}, num_partitions=1)
    start = timezone.now() - timedelta(minutes=20)
    start = start.replace(second=0, microsecond=0)
    Partition.objects.filter(job=job).update(state=PartitionState.DONE, worker=worker, host=host,
                                             gpu_started_at=start, gpu_finished_at=start + timedelta(seconds=30))
    (util,) = [v for t, v in by_title().items() if "utilisation" in t]
    assert round(sum(util) / 100 * 60) == 30  # thirty busy seconds, however the buckets fall


def test_the_history_page_draws_one_svg_per_series(staff: Client) -> None:
    finished("a", JobState.DONE, 3)
    html = staff.get("/history/?window=day").content.decode()
    assert html.count('<svg id="history-') == 4
    assert "<b>last day</b>" in html and 'aria-label="proofs per minute"' in html


def test_the_history_page_gives_each_kinds_and_hosts_throughput_and_cost_per_proof(staff: Client) -> None:
    host = EngineHost.objects.create(name="gpu-a", cost_per_hour=3.6)
    worker = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    a_proved_job(host, worker, "in-range", at=timedelta(minutes=30))
    a_proved_job(host, worker, "before-the-range", at=timedelta(hours=3))
    html = staff.get("/history/?window=hour").content.decode()
    kinds = html[html.index('id="history-kinds"'):html.index('id="history-hosts"')]
    hosts = html[html.index('id="history-hosts"'):]
    row = kinds[kinds.index('data-kind="porep-c2"'):]
    # one job of two partitions in the hour; GPU 1 s mean and p95; the hour's $3.60 over one proof
    assert "<td>1</td><td>2</td><td>1.0</td><td>2.0</td>" in row and "<td>1.0s / 1.0s</td>" in row
    assert "<td data-cost-per-proof>$3.60</td>" in row
    assert 'data-host="gpu-a"' in hosts and "<td>$3.60</td>" in hosts  # its cost per hour, as recorded


def test_a_range_with_nothing_proved_says_so(staff: Client) -> None:
    html = staff.get("/history/?window=6h").content.decode()
    assert html.count("Nothing proved in this range.") == 2
