"""The history page: series derived from the records' timestamps, drawn as server-side SVG."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from engine.console.history import read_history
from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState

pytestmark = pytest.mark.django_db


def finished(job_id: str, state: str, minutes_ago: float) -> ProofJob:
    job, _ = submit_job(kind="winning-post", job_id=job_id, inputs={}, num_partitions=1)
    at = timezone.now() - timedelta(minutes=minutes_ago)
    ProofJob.objects.filter(pk=job.pk).update(state=state, submitted_at=at - timedelta(seconds=30),
                                              started_at=at - timedelta(seconds=20), finished_at=at)
    return job


def by_title(window: str = "hour") -> dict[str, list[float]]:
    _, series = read_history(window, timezone.now())
    return {s.title: s.values for s in series}


def test_proofs_and_failures_land_in_the_minute_they_finished() -> None:
    finished("a", JobState.DONE, 10.5)
    finished("b", JobState.DONE, 10.5)
    finished("c", JobState.FAILED, 30.5)
    series = by_title()
    assert sum(series["proofs per minute"]) == 2 and max(series["proofs per minute"]) == 2
    assert sum(series["failures per minute"]) == 1


def test_queue_depth_counts_jobs_waiting_at_each_moment() -> None:
    job, _ = submit_job(kind="porep-c2", job_id="waiting", inputs={}, num_partitions=1)
    ProofJob.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=5))
    depth = by_title()["queue depth"]
    assert depth[-1] == 1 and depth[-10] == 0


def test_a_worker_busy_for_half_a_minute_shows_half_of_that_bucket() -> None:
    host = EngineHost.objects.create(name="h")
    worker = Worker.objects.create(host=host, device="cpu", ordinal=0)
    job, _ = submit_job(kind="porep-c2", job_id="busy", inputs={}, num_partitions=1)
    _, series = read_history("hour", now := timezone.now())
    start = now - timedelta(minutes=20)
    start = start.replace(second=0, microsecond=0)
    Partition.objects.filter(job=job).update(state=PartitionState.DONE, worker=worker, host=host,
                                             gpu_started_at=start, gpu_finished_at=start + timedelta(seconds=30))
    (util,) = [v for t, v in by_title().items() if "utilisation" in t]
    assert round(sum(util) / 100 * 60) == 30  # thirty busy seconds, however the buckets fall


def test_the_history_page_draws_one_svg_per_series(staff: Client) -> None:
    finished("a", JobState.DONE, 3)
    html = staff.get("/history/?window=day").content.decode()
    assert html.count('<svg id="history-') == 3
    assert "<b>last day</b>" in html and 'aria-label="proofs per minute"' in html
