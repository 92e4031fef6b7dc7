"""A job with a deadline says where it stands in the pipelines panel and on its own page: "due in
…" with time to spare, "at risk: due in …" once its expected finish passes the deadline, "late
by …" once the deadline has; the page agrees with /status, and the countdown ticks without
changing what a pass sends."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from engine.console import markup
from engine.console.render import render
from engine.format import epoch_ms
from engine.ledger.jobs import submit_job
from engine.models import ProofJob
from engine.states import JobState

pytestmark = pytest.mark.django_db


def deadline_job(job_id: str, deadline_in: float, now: datetime, **fields: object) -> ProofJob:
    made, _ = submit_job(kind="porep-c2", job_id=job_id, inputs={}, num_partitions=2, circuit_id="porep-c2/tiny",
                         deadline=now + timedelta(seconds=deadline_in))
    ProofJob.objects.filter(pk=made.pk).update(**fields)
    made.refresh_from_db()
    return made


@pytest.fixture
def jobs() -> dict[str, ProofJob]:
    """porep-c2/tiny takes 30 s on this farm (its record). One job queued with 10 s to its
    deadline (at risk), one running 3 s past its deadline (late), one with ten minutes (on time)
    and one without a deadline."""
    now = timezone.now()
    for i in range(3):
        ProofJob.objects.create(job_id=f"history-{i}", kind="porep-c2", circuit_id="porep-c2/tiny",
                                state=JobState.DONE, started_at=now - timedelta(seconds=100),
                                finished_at=now - timedelta(seconds=70))
    plain, _ = submit_job(kind="porep-c2", job_id="plain", inputs={}, num_partitions=1)
    return {"risky": deadline_job("risky", 10, now),
            "late": deadline_job("late", -3, now, state=JobState.RUNNING, started_at=now - timedelta(seconds=20)),
            "roomy": deadline_job("roomy", 600, now), "plain": plain}


def deadline_of(job: ProofJob) -> datetime:
    assert job.deadline is not None
    return job.deadline


def pipeline_head(page: str, job: ProofJob) -> str:
    return page.split(f'<div id="job-{job.pk}-head"', 1)[1].split("</div>", 1)[0]


def job_head(page: str) -> str:
    return page.split('<div id="job-detail-head"', 1)[1].split("</div>", 1)[0]


def test_the_pipelines_mark_a_job_at_risk_and_a_late_one(staff: Client, jobs: dict[str, ProofJob]) -> None:
    page = staff.get("/").content.decode()
    risky, late, roomy = (pipeline_head(page, jobs[name]) for name in ("risky", "late", "roomy"))
    assert f'data-deadline="{epoch_ms(jobs["risky"].deadline)}" data-deadline-state="at-risk"' in risky
    assert re.search(r'class="deadline at-risk"[^>]*>at risk: due in \d+\.\ds<', risky), risky
    assert f'data-deadline="{epoch_ms(jobs["late"].deadline)}" data-deadline-state="late"' in late
    assert re.search(r'class="deadline late"[^>]*>late by 3\.\ds<', late), late
    assert 'data-deadline-state="on-time"' in roomy
    assert re.search(r'class="deadline on-time"[^>]*>due in (9m 5\ds|10m 00s)<', roomy), roomy
    plain = pipeline_head(page, jobs["plain"])
    assert "data-deadline" not in plain and "deadline" not in plain


def test_the_pipelines_and_status_agree_on_every_jobs_standing(staff: Client, jobs: dict[str, ProofJob]) -> None:
    status = {p["job_id"]: p for p in staff.get("/status").json()["pipelines"]}
    page = staff.get("/").content.decode()
    for name, job in jobs.items():
        row = status[job.job_id]
        state = "late" if row["late"] else "at-risk" if row["at_risk"] else "on-time"
        head = pipeline_head(page, job)
        assert (f'data-deadline-state="{state}"' in head) == (row["deadline"] is not None), name


def test_the_countdown_ticks_in_the_browser_between_flushes(staff: Client, jobs: dict[str, ProofJob]) -> None:
    """The queued job turns at risk once less than its expected 30 s are left: the browser is
    told when (data-risk-at), as it is told the deadline (data-due-at)."""
    head = pipeline_head(staff.get("/").content.decode(), jobs["roomy"])
    deadline = deadline_of(jobs["roomy"])
    assert f'data-due-at="{epoch_ms(deadline)}" data-risk-at="{epoch_ms(deadline - timedelta(seconds=30))}"' in head


def test_a_pass_later_sends_nothing_new_until_the_job_turns_late(jobs: dict[str, ProofJob],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    key = f"pipelines/{jobs['risky'].pk}/head"
    moment = timezone.now()

    def at(seconds: float) -> tuple[str, str]:
        monkeypatch.setattr("engine.console.render.timezone.now", lambda: moment + timedelta(seconds=seconds))
        unit = render(["pipelines"]).units[key]
        return unit.html or "", unit.digest

    first, second = at(0), at(2)
    assert first[1] == second[1] and first[0] != second[0]  # only the countdown's text moved
    late = at(12)
    assert late[1] != first[1] and 'data-deadline-state="late"' in late[0]
    assert re.search(r'class="deadline late"[^>]*>late by 2\.\ds<', late[0]), late[0]
    markup._MEMO.kept.clear()
    assert at(12) == late  # what was kept is what a pass making everything afresh shows


def test_the_job_page_says_at_risk_and_late_in_its_head(staff: Client, jobs: dict[str, ProofJob]) -> None:
    risky = job_head(staff.get("/jobs/risky").content.decode())
    assert f'data-deadline="{epoch_ms(jobs["risky"].deadline)}" data-deadline-state="at-risk"' in risky
    assert re.search(r'class="deadline at-risk"[^>]*>at risk: due in \d+\.\ds<', risky), risky
    late = job_head(staff.get("/jobs/late").content.decode())
    assert 'data-deadline-state="late"' in late and re.search(r'class="deadline late"[^>]*>late by 3\.\ds<', late)
    assert "data-deadline" not in job_head(staff.get("/jobs/plain").content.decode())


def test_the_job_page_of_a_finished_job_says_whether_it_missed_its_deadline(
        staff: Client, jobs: dict[str, ProofJob]) -> None:
    late = jobs["late"]
    ProofJob.objects.filter(pk=late.pk).update(state=JobState.DONE, finished_at=deadline_of(late) + timedelta(seconds=4))
    head = job_head(staff.get("/jobs/late").content.decode())
    assert 'data-deadline-state="missed"' in head and "missed its deadline by 4.0s" in head
    assert "data-due-at" not in head  # final: nothing ticks
    roomy = jobs["roomy"]
    ProofJob.objects.filter(pk=roomy.pk).update(state=JobState.DONE, finished_at=deadline_of(roomy) - timedelta(seconds=90))
    head = job_head(staff.get("/jobs/roomy").content.decode())
    assert 'data-deadline-state="on-time"' in head and "finished 1m 30s before its deadline" in head
