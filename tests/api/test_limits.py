"""A token's limits (the priority it may ask for, its cap on active jobs) and the bounds on
the list's query parameters: every refusal a 4xx naming what to fix, never a 500."""

from __future__ import annotations

from typing import TypedDict, Unpack

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from engine.ledger.tokens import issue_token
from engine.models import ApiToken, ProofJob, TokenScope
from engine.states import JobState, Priority
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db


def submit(client: Client, job_id: str = "porep-1", kind: str = "porep-c2", **body: object):
    payload = {"kind": kind, "job_id": job_id, "inputs": inputs(), **body}
    return client.post("/api/v1/jobs", payload, content_type="application/json")


class Limits(TypedDict, total=False):
    max_priority: int | None
    max_active_jobs: int | None


def client_for(**limits: Unpack[Limits]) -> Client:
    _, raw = issue_token("limited-client", **limits)
    return Client(headers={"Authorization": f"Bearer {raw}"})


def refusal(response, status: int) -> dict:
    assert response.status_code == status, response.content
    return response.json()


# ---- priority ------------------------------------------------------------------------------


def test_a_client_token_asking_for_critical_is_refused_with_403_naming_priority(api: Client) -> None:
    body = refusal(submit(api, priority="critical"), 403)
    assert body["field"] == "priority" and "normal" in body["detail"]
    assert not ProofJob.objects.exists()


@pytest.mark.parametrize("priority", ["normal", "low", 2])
def test_a_client_token_may_ask_for_its_own_maximum_or_less(api: Client, priority: object) -> None:
    assert submit(api, priority=priority).status_code == 201


def test_a_kind_s_default_priority_is_lowered_to_a_client_token_s_limit(api: Client) -> None:
    # The limit is on what a token's jobs get, asked for or not: a winning-post's critical is for
    # tokens an operator allowed critical (createtoken --max-priority critical).
    assert submit(api, kind="winning-post", job_id="wpost-1").status_code == 201
    assert ProofJob.objects.get(job_id="wpost-1").priority == Priority.NORMAL
    assert submit(client_for(max_priority=Priority.CRITICAL), kind="winning-post", job_id="wpost-2").status_code == 201
    assert ProofJob.objects.get(job_id="wpost-2").priority == Priority.CRITICAL


def test_a_token_whose_limit_was_raised_to_high_may_ask_for_high_but_not_critical() -> None:
    client = client_for(max_priority=Priority.HIGH)
    assert submit(client, priority="high").status_code == 201
    assert refusal(submit(client, job_id="porep-2", priority="critical"), 403)["field"] == "priority"


def test_a_custom_upload_at_a_priority_above_the_token_s_is_refused_before_its_files_are_read(
        api: Client, uploads: object) -> None:
    response = api.post("/api/v1/jobs/custom", {"job_id": "custom-1", "priority": "critical"})
    assert refusal(response, 403)["field"] == "priority"


# ---- the cap on active jobs ---------------------------------------------------------------


def test_a_submission_over_the_token_s_cap_on_active_jobs_is_refused_with_429() -> None:
    client = client_for(max_active_jobs=2)
    assert [submit(client, job_id=f"porep-{n}").status_code for n in range(2)] == [201, 201]
    body = refusal(submit(client, job_id="porep-2"), 429)
    assert body["error"] == "too_many_active_jobs" and "2 queued or running" in body["detail"]
    assert ProofJob.objects.count() == 2


def test_a_finished_job_frees_its_place_under_the_cap() -> None:
    client = client_for(max_active_jobs=1)
    assert submit(client, job_id="porep-0").status_code == 201
    ProofJob.objects.filter(job_id="porep-0").update(state=JobState.DONE)
    assert submit(client, job_id="porep-1").status_code == 201


def test_the_same_request_again_at_the_cap_still_returns_the_existing_job() -> None:
    client = client_for(max_active_jobs=1)
    assert submit(client).status_code == 201
    assert submit(client).status_code == 200


def test_the_cap_counts_only_the_token_s_own_jobs(api: Client) -> None:
    client = client_for(max_active_jobs=1)
    assert submit(api, job_id="theirs-1").status_code == 201
    assert submit(client, job_id="mine-1").status_code == 201


def test_new_tokens_get_their_scope_s_limits() -> None:
    client, _ = issue_token("a-client")
    operator, _ = issue_token("a-dashboard", scope=TokenScope.OPERATOR)
    assert (client.max_priority, client.max_active_jobs) == (Priority.NORMAL, 64)
    assert (operator.max_priority, operator.max_active_jobs) == (Priority.CRITICAL, None)


def test_createtoken_sets_the_limits_it_is_given() -> None:
    call_command("createtoken", "curio-east", "--max-priority", "high", "--max-active", "8")
    call_command("createtoken", "curio-west", "--max-active", "none")
    east, west = ApiToken.objects.get(name="curio-east"), ApiToken.objects.get(name="curio-west")
    assert (east.max_priority, east.max_active_jobs) == (Priority.HIGH, 8)
    assert (west.max_priority, west.max_active_jobs) == (Priority.NORMAL, None)


def test_an_admin_edits_a_token_s_limits_from_the_token_list() -> None:
    record, _ = issue_token("editable")
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("root", "", "pw-for-tests-only"))
    form = {"form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1", "form-0-id": str(record.pk),
            "form-0-max_priority": "1", "form-0-max_active_jobs": "", "_save": "Save"}
    assert staff.post("/admin/engine/apitoken/", form).status_code == 302
    record.refresh_from_db()
    assert (record.max_priority, record.max_active_jobs) == (Priority.HIGH, None)


@pytest.mark.django_db(transaction=True)
def test_tokens_from_before_the_limits_keep_what_their_scope_allowed() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("engine", "0002_token_scope")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("engine", "ApiToken")
    old.objects.create(name="dashboard", scope="operator", prefix="ps_a", token_hash="a" * 64)
    old.objects.create(name="client", scope="client", prefix="ps_b", token_hash="b" * 64)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    dashboard, client = ApiToken.objects.get(name="dashboard"), ApiToken.objects.get(name="client")
    assert (dashboard.max_priority, dashboard.max_active_jobs) == (Priority.CRITICAL, None)
    assert (client.max_priority, client.max_active_jobs) == (Priority.NORMAL, 64)


# ---- bounded query parameters (each was a 500) ---------------------------------------------


def test_an_offset_past_any_database_s_range_is_a_400_naming_offset(api: Client) -> None:
    body = refusal(api.get("/api/v1/jobs", {"offset": "9223372036854775808"}), 400)
    assert body["field"] == "offset"


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"])
def test_a_since_outside_the_years_1_to_9999_in_utc_is_a_400_naming_since(api: Client, since: str) -> None:
    body = refusal(api.get("/api/v1/jobs", {"since": since}), 400)
    assert body["field"] == "since" and "UTC" in body["detail"]


def test_a_since_with_an_offset_no_database_stores_is_read_in_utc(api: Client) -> None:
    # PostgreSQL refuses a -23:59 offset; the time itself is fine once in UTC.
    assert submit(api).status_code == 201
    response = api.get("/api/v1/jobs", {"since": "0001-01-01T00:00:00-23:59"})
    assert response.status_code == 200 and response.json()["count"] == 1
