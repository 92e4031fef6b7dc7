"""The admin is the job-history browser: lists, filters, search and read-only history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState, ProofKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    user = get_user_model().objects.create_superuser("root", "", "pw-for-tests-only")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def history() -> ProofJob:
    host = EngineHost.objects.create(name="gpu-host-a")
    worker = Worker.objects.create(host=host, device="cuda:0", ordinal=1)
    now = timezone.now()
    job = ProofJob.objects.create(
        job_id="snap-update-history-0001", kind=ProofKind.SNAP_UPDATE, state=JobState.DONE, host=host,
        num_partitions=2, started_at=now, finished_at=now + timedelta(seconds=9),
    )
    for index in range(2):
        Partition.objects.create(
            job=job, index=index, state=PartitionState.DONE, host=host, worker=worker, attempt=1,
            synth_started_at=now, synth_finished_at=now + timedelta(milliseconds=587),
            gpu_started_at=now + timedelta(seconds=1), gpu_finished_at=now + timedelta(seconds=6, milliseconds=200),
            finished_at=now + timedelta(seconds=7),
        )
    ProofJob.objects.create(job_id="window-post-queued-7", kind=ProofKind.WINDOW_POST)
    return job


def test_the_job_list_shows_kind_state_host_and_progress(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_changelist")).content.decode()
    assert "snap-update-history-0001" in page
    assert "gpu-host-a" in page
    assert "2/2" in page
    assert "window-post-queued-7" in page


@pytest.mark.parametrize("field", ["kind", "state", "host"])
def test_the_job_list_filters_down_to_the_matching_jobs(staff: Client, history: ProofJob, field: str) -> None:
    query = {"kind": "kind__exact=snap-update", "state": "state__exact=done",
             "host": f"host__id__exact={history.host_id}"}[field]
    page = staff.get(reverse("admin:engine_proofjob_changelist") + "?" + query).content.decode()
    assert "snap-update-history-0001" in page
    assert "window-post-queued-7" not in page


def test_search_by_job_id_finds_the_job(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_changelist") + "?q=history-0001").content.decode()
    assert "snap-update-history-0001" in page
    assert "window-post-queued-7" not in page


def test_the_job_page_lists_partitions_with_phase_durations_and_worker(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_change", args=[history.pk])).content.decode()
    assert "587 ms" in page
    assert "5200 ms" in page
    assert "cuda:0 W1" in page


def test_history_cannot_be_edited_by_hand(staff: Client, history: ProofJob) -> None:
    staff.post(reverse("admin:engine_proofjob_change", args=[history.pk]), {"state": "queued"})
    history.refresh_from_db()
    assert history.state == JobState.DONE
    assert staff.get(reverse("admin:engine_proofjob_add")).status_code == 403
