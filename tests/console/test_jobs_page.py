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
from engine.models import ApiToken, Partition, ProofJob
from engine.states import JobState, PartitionState

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
        row = everything.split(f'href="/jobs/{name}"', 1)[1].split("</div>", 1)[0]
        assert f'<span class="deadline {mark}" data-deadline-state="{mark}">' in row, name
    assert 'class="deadline' not in everything.split('href="/jobs/roomy"', 1)[1].split("</div>", 1)[0]


def listed_ids(html: str) -> list[str]:
    """The job ids of the table's rows, in the order shown."""
    return re.findall(r'<div id="job-row-\d+"[^>]* data-job="([^"]+)"', html)


def test_the_search_box_finds_jobs_by_any_part_of_their_id_whatever_the_case(staff: Client) -> None:
    for job_id in ("Sector-0042-Alpha", "sector-0043-beta", "window-7"):
        submit_job(kind="porep-c2", job_id=job_id, inputs={}, num_partitions=1)
    html = staff.get("/jobs/?q=SECTOR-004").content.decode()
    assert sorted(listed_ids(html)) == ["Sector-0042-Alpha", "sector-0043-beta"]
    assert 'name="q" value="SECTOR-004"' in html  # the box keeps what was searched
    assert listed_ids(staff.get("/jobs/?q=alpha").content.decode()) == ["Sector-0042-Alpha"]
    assert listed_ids(staff.get("/jobs/?q=nothing-like-it").content.decode()) == []


# Four jobs with a different order in every column (now = N; "total" of an active job is its age).
#   job    kind          state    priority  done/of  client   submitted  total
#   a-job  winning-post  done     critical  1/1      delta    N-40m      25m
#   b-job  window-post   failed   high      0/2      charlie  N-10m      1m
#   c-job  porep-c2      running  normal    3/10     alpha    N-30m      30m (growing)
#   d-job  snap-update   queued   low       2/16     bravo    N-20m      20m (growing)
ASCENDING = {
    "job": ["a-job", "b-job", "c-job", "d-job"],
    "kind": ["c-job", "d-job", "b-job", "a-job"],
    "state": ["d-job", "c-job", "a-job", "b-job"],  # in a job's life: queued, running, done, failed
    "priority": ["a-job", "b-job", "c-job", "d-job"],  # critical first
    "partitions": ["b-job", "a-job", "d-job", "c-job"],  # by partitions done
    "client": ["c-job", "d-job", "b-job", "a-job"],
    "submitted": ["a-job", "c-job", "d-job", "b-job"],
    "total": ["b-job", "d-job", "a-job", "c-job"],
}


@pytest.fixture
def four_jobs() -> None:
    now = timezone.now()
    rows = [("a-job", "winning-post", JobState.DONE, 0, 1, 1, "delta", 40, 15),
            ("b-job", "window-post", JobState.FAILED, 1, 2, 0, "charlie", 10, 9),
            ("c-job", "porep-c2", JobState.RUNNING, 2, 10, 3, "alpha", 30, None),
            ("d-job", "snap-update", JobState.QUEUED, 3, 16, 2, "bravo", 20, None)]
    for job_id, kind, state, priority, of, done, client, submitted, finished in rows:
        token, _ = issue_token(client)
        job = ProofJob.objects.create(job_id=job_id, kind=kind, state=state, priority=priority, num_partitions=of,
                                      client=token)
        ProofJob.objects.filter(pk=job.pk).update(
            submitted_at=now - timedelta(minutes=submitted),
            finished_at=None if finished is None else now - timedelta(minutes=finished))
        Partition.objects.bulk_create(
            Partition(job=job, index=i, state=PartitionState.DONE if i < done else PartitionState.PENDING)
            for i in range(of))


@pytest.mark.usefixtures("four_jobs")
@pytest.mark.parametrize("column", list(ASCENDING))
def test_every_column_sorts_both_ways_and_its_header_shows_the_order(staff: Client, column: str) -> None:
    up = staff.get(f"/jobs/?sort={column}").content.decode()
    down = staff.get(f"/jobs/?sort=-{column}").content.decode()
    assert listed_ids(up) == ASCENDING[column]
    assert listed_ids(down) == ASCENDING[column][::-1]
    header = f'<span role="columnheader" data-column="{column}"'
    assert f'{header} aria-sort="ascending"><a href="?sort=-{column}">{column} <span class="arrow">▲</span>' in up
    assert f'{header} aria-sort="descending"><a href="?sort={column}">{column} <span class="arrow">▼</span>' in down
    assert up.count('aria-sort="none"') == len(ASCENDING) - 1


@pytest.mark.usefixtures("four_jobs")
def test_the_default_order_is_newest_first_and_an_unknown_sort_says_so_and_falls_back_to_it(staff: Client) -> None:
    newest_first = ASCENDING["submitted"][::-1]
    assert listed_ids(staff.get("/jobs/").content.decode()) == newest_first
    response = staff.get("/jobs/?sort=-inputs&kind=")
    html = response.content.decode()
    assert response.status_code == 200 and listed_ids(html) == newest_first
    assert "“-inputs” is not a column to sort by" in html and "sorted by -submitted instead" in html
    assert 'sse-connect="/events/?jobs=sort%3D-submitted"' in html  # the live table is the default's too
    assert "is not a column" not in staff.get("/jobs/?sort=-total").content.decode()


def test_sorting_keeps_the_filters_and_search_and_paging_keeps_the_sort(staff: Client) -> None:
    jobs(60, prefix="keep")
    jobs(3, kind="winning-post", prefix="other")
    html = staff.get("/jobs/?kind=porep-c2&q=KEEP&sort=job&page=2").content.decode()
    assert listed_ids(html) == [f"keep-{i:03d}" for i in range(50, 60)]
    # Clicking a header starts at page 1 of the same view; the page links keep the sort.
    assert '<a href="?kind=porep-c2&amp;q=KEEP&amp;sort=-job">job' in html
    assert '<a href="?kind=porep-c2&amp;q=KEEP&amp;sort=job">← previous</a>' in html
    assert 'name="sort" value="job"' in html  # the filter form keeps it too
    assert 'sse-connect="/events/?jobs=kind%3Dporep-c2%26q%3DKEEP%26sort%3Djob%26page%3D2"' in html


def bulk(client: Client, action: str, *job_ids: str, follow: bool = True) -> Any:
    return client.post("/jobs/", {"action": action, "job": list(job_ids), "next": "/jobs/?sort=job"}, follow=follow)


def states() -> dict[str, str]:
    return dict(ProofJob.objects.values_list("job_id", "state"))


def test_cancel_selected_cancels_the_active_ones_and_names_those_it_skipped(staff: Client) -> None:
    jobs(3)
    ProofJob.objects.filter(job_id="j-002").update(state=JobState.DONE)
    response = bulk(staff, "cancel", "j-000", "j-001", "j-002", "no-such-job")
    assert response.redirect_chain == [("/jobs/?sort=job", 302)]
    assert states() == {"j-000": "cancelled", "j-001": "cancelled", "j-002": "done"}
    page = response.content.decode()
    assert "2 jobs cancelled: j-000, j-001" in page
    assert "2 skipped: j-002 is done: nothing to cancel; no-such-job: no such job" in page


def test_retry_selected_queues_the_failed_and_cancelled_ones_again_and_skips_the_rest(staff: Client) -> None:
    jobs(3)
    ProofJob.objects.filter(job_id="j-000").update(state=JobState.FAILED)
    ProofJob.objects.filter(job_id="j-001").update(state=JobState.CANCELLED)
    page = bulk(staff, "retry", "j-000", "j-001", "j-002").content.decode()
    assert states() == {"j-000": "queued", "j-001": "queued", "j-002": "queued"}
    assert "2 jobs queued again: j-000, j-001" in page
    assert "1 skipped: j-002 is queued: only failed or cancelled jobs are retried" in page


def test_the_bulk_buttons_ask_first_with_how_many_jobs_they_act_on(staff: Client) -> None:
    jobs(1)
    html = staff.get("/jobs/").content.decode()
    assert 'name="action" value="cancel" data-bulk="cancel" data-confirm="Cancel the selected jobs?' in html
    assert 'type="checkbox" name="job" value="j-000" form="jobs-actions"' in html and "data-pick-all" in html
    assert "window.confirm(question)" in html and "console/jobs.js" in html
    script = (Path(__file__).resolve().parents[2] / "static" / "console" / "jobs.js").read_text()
    assert '"Cancel " + jobs + "?' in script and '"1 selected job"' in script


def test_a_bulk_action_with_nothing_selected_or_an_unknown_action_changes_nothing(staff: Client) -> None:
    jobs(1)
    assert "No jobs selected: nothing to cancel." in bulk(staff, "cancel").content.decode()
    response = bulk(staff, "delete", "j-000", follow=False)
    assert response.status_code == 400 and "action: 'delete' is not one of cancel, retry" in response.content.decode()
    assert states() == {"j-000": "queued"}


def test_bulk_actions_are_refused_to_anonymous_visitors_and_non_operators(operator_user: Any) -> None:
    jobs(2)
    anonymous = bulk(Client(), "cancel", "j-000", follow=False)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    outsider = Client()
    outsider.force_login(get_user_model().objects.create_user("nobody", password="pw"))
    assert bulk(outsider, "cancel", "j-000", follow=False).status_code == 403
    assert states() == {"j-000": "queued", "j-001": "queued"}
    operator = Client()
    operator.force_login(operator_user)  # the operator group, not staff: may act
    assert "1 job cancelled: j-001" in bulk(operator, "cancel", "j-001").content.decode()


def test_bulk_actions_need_the_csrf_token(staff_user: Any) -> None:
    jobs(1)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(staff_user)
    assert bulk(strict, "cancel", "j-000", follow=False).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', strict.get("/jobs/").content.decode())
    assert token is not None
    response = strict.post("/jobs/", {"action": "cancel", "job": ["j-000"], "csrfmiddlewaretoken": token.group(1)})
    assert response.status_code == 302 and states() == {"j-000": "cancelled"}


@pytest.mark.usefixtures("four_jobs")
def test_an_active_job_s_total_ticks_from_its_submission_and_a_finished_one_s_is_final(staff: Client) -> None:
    html = staff.get("/jobs/").content.decode()

    def row(job_id: str) -> str:
        return html.split(f'data-job="{job_id}"', 1)[1].split("</div>", 1)[0]

    submitted = ProofJob.objects.get(job_id="c-job").submitted_at
    assert f'<span class="tick" data-started-at="{int(submitted.timestamp() * 1000)}">' in row("c-job")
    assert '<span class="final">25m 00s</span>' in row("a-job") and "data-started-at" not in row("a-job")


def test_a_page_number_or_date_the_page_cannot_use_shows_the_first_page_unfiltered(staff: Client) -> None:
    jobs(2)
    for query in ("page=" + "9" * 5000, "page=-1", "page=x", "since=2020-13-45", "since=yesterday"):
        response = staff.get(f"/jobs/?{query}")
        assert response.status_code == 200 and listed_ids(response.content.decode()) == ["j-001", "j-000"], query
