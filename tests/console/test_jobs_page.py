"""The console's jobs page: every job, filtered and paginated, with cancel and retry for the
operator role through the same actions the admin uses (CSRF-protected)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from engine.ledger.jobs import submit_job
from engine.ledger.tokens import issue_token
from engine.models import ApiToken, ProofJob
from engine.states import JobState

pytestmark = pytest.mark.django_db


def jobs(n: int, kind: str = "porep-c2", prefix: str = "j") -> list[ProofJob]:
    return [submit_job(kind=kind, job_id=f"{prefix}-{i:03d}", inputs={}, num_partitions=1)[0] for i in range(n)]


def test_the_jobs_page_lists_jobs_newest_first_and_paginates(staff: Client) -> None:
    jobs(60)
    html = staff.get("/jobs/").content.decode()
    assert 'data-matching="60"' in html and "j-059" in html and "j-000" not in html
    assert "page 1 of 2" in html
    assert "j-000" in staff.get("/jobs/?page=2").content.decode()


def test_filters_narrow_by_kind_state_client_and_id(staff: Client) -> None:
    jobs(2, prefix="por")
    jobs(2, kind="winning-post", prefix="win")
    token, _ = issue_token("acme")
    ProofJob.objects.filter(job_id="win-001").update(client=token, state=JobState.FAILED)
    assert 'data-matching="2"' in staff.get("/jobs/?kind=winning-post").content.decode()
    html = staff.get("/jobs/?state=failed&client=acme").content.decode()
    assert 'data-matching="1"' in html and "win-001" in html
    assert 'data-matching="1"' in staff.get("/jobs/?kind=porep-c2&since=2000-01-01&q=por-001").content.decode()


def test_an_operator_cancels_and_retries_from_the_page(staff: Client) -> None:
    (job,) = jobs(1)
    assert 'formaction="/jobs/j-000/cancel"' in staff.get("/jobs/").content.decode()
    response = staff.post("/jobs/j-000/cancel", {"next": "/jobs/?state=cancelled"})
    assert response.status_code == 302 and response["Location"] == "/jobs/?state=cancelled"
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    staff.post("/jobs/j-000/retry")
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_cancel_needs_the_csrf_token_and_the_operator_role() -> None:
    (job,) = jobs(1)
    user = get_user_model().objects.create_user("op", password="pw", is_staff=True)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/jobs/j-000/cancel").status_code == 403
    outsider = Client()
    outsider.force_login(get_user_model().objects.create_user("nobody", password="pw"))
    assert outsider.post("/jobs/j-000/cancel").status_code == 403
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert ApiToken.objects.count() == 0


def test_cancel_on_the_jobs_page_asks_before_it_posts(staff: Client) -> None:
    submit_job(kind="porep-c2", job_id="ask-me", inputs={}, num_partitions=1)
    html = staff.get("/jobs/").content.decode()
    assert 'formaction="/jobs/ask-me/cancel" data-confirm="Cancel ask-me?' in html
    assert "window.confirm(question)" in html


def test_cancelling_a_job_that_already_finished_says_so_and_changes_nothing(staff: Client) -> None:
    (job,) = jobs(1)
    ProofJob.objects.filter(pk=job.pk).update(state=JobState.DONE)
    page = staff.post("/jobs/j-000/cancel", {"next": "/jobs/j-000"}, follow=True).content.decode()
    assert "j-000 is done: nothing to cancel" in page
    job.refresh_from_db()
    assert job.state == JobState.DONE


def test_the_job_page_offers_the_action_its_state_allows_and_its_key(staff: Client) -> None:
    token, _ = issue_token("acme")
    (job,) = jobs(1)
    ProofJob.objects.filter(pk=job.pk).update(client=token)
    page = staff.get("/jobs/j-000").content.decode()
    assert 'action="/jobs/j-000/cancel"' in page and 'action="/jobs/j-000/retry"' in page
    assert 'id="job-detail-head" class="job-head" data-state="queued"' in page  # what the CSS shows cancel for
    assert "sent by acme" in page and 'href="/jobs/j-000/verification_key.json"' in page


def test_the_job_pages_key_link_answers_with_the_apis_key_or_its_reason(staff: Client, settings: Any, tmp_path: Path) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PARAMS_DIR": tmp_path}  # no keys made here
    submit_job(kind="winning-post", job_id="w-1", inputs={}, num_partitions=1, circuit_id="winning-post/tiny")
    response = staff.get("/jobs/w-1/verification_key.json")
    assert response.status_code == 409 and "manage.py setupkeys --kind winning-post" in response.json()["detail"]


def test_the_deadline_filter_lists_jobs_at_risk_late_or_that_missed_it(staff: Client) -> None:
    now = timezone.now()
    for i in range(3):  # porep-c2/tiny takes 30 s on this farm
        ProofJob.objects.create(job_id=f"history-{i}", kind="porep-c2", circuit_id="porep-c2/tiny",
                                state=JobState.DONE, started_at=now - timedelta(seconds=100),
                                finished_at=now - timedelta(seconds=70))

    def job(job_id: str, deadline_in: float | None, **fields: object) -> None:
        deadline = None if deadline_in is None else now + timedelta(seconds=deadline_in)
        made, _ = submit_job(kind="porep-c2", job_id=job_id, inputs={}, num_partitions=1,
                             circuit_id="porep-c2/tiny", deadline=deadline)
        ProofJob.objects.filter(pk=made.pk).update(**fields)

    job("risky", 10)
    job("late", -3, state=JobState.RUNNING, started_at=now - timedelta(seconds=20))
    job("roomy", 600)
    job("plain", None)
    job("missed", -60, state=JobState.DONE, finished_at=now - timedelta(seconds=10))
    job("made-it", -60, state=JobState.DONE, finished_at=now - timedelta(seconds=70))

    def listed(choice: str) -> set[str]:
        html = staff.get(f"/jobs/?deadline={choice}").content.decode()
        return set(re.findall(r'class="job-id" href="/jobs/([^"]+)"', html))

    assert listed("at-risk") == {"risky"}
    assert listed("late") == {"late"}
    assert listed("missed") == {"missed"}
    assert len(listed("")) == 9 and listed("nonsense") == listed("")
    page = staff.get("/jobs/?deadline=late").content.decode()
    assert '<option value="late" selected>late</option>' in page  # a select like the others
    everything = staff.get("/jobs/").content.decode()
    for name, mark in (("risky", "at-risk"), ("late", "late"), ("missed", "missed")):
        row = everything.split(f'href="/jobs/{name}"', 1)[1].split("</tr>", 1)[0]
        assert f'<span class="deadline {mark}" data-deadline-state="{mark}">' in row, name
    assert 'class="deadline' not in everything.split('href="/jobs/roomy"', 1)[1].split("</tr>", 1)[0]
