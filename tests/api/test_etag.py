"""Cheap polls: job reads carry an ETag, and If-None-Match with it is a 304 until the job (or
the page) changes. Each read runs in one database snapshot, so the tag names what was sent."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import Client

from engine.ledger import jobs as actions
from engine.models import ProofJob
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db


def submit(api: Client, job_id: str = "porep-1") -> None:
    body = {"kind": "porep-c2", "job_id": job_id, "inputs": inputs()}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201


def test_a_job_read_again_unchanged_is_a_304_without_a_body(api: Client) -> None:
    submit(api)
    first = api.get("/api/v1/jobs/porep-1")
    again = api.get("/api/v1/jobs/porep-1", headers={"If-None-Match": first["ETag"]})
    assert first.status_code == 200 and first["ETag"]
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]


def test_a_job_that_changed_is_sent_again_with_a_new_etag(api: Client) -> None:
    submit(api)
    first = api.get("/api/v1/jobs/porep-1")
    actions.cancel_job(ProofJob.objects.get(job_id="porep-1"))
    after = api.get("/api/v1/jobs/porep-1", headers={"If-None-Match": first["ETag"]})
    assert after.status_code == 200 and after.json()["state"] == "cancelled"
    assert after["ETag"] != first["ETag"]


def test_a_weak_or_listed_if_none_match_counts(api: Client) -> None:
    submit(api)
    etag = api.get("/api/v1/jobs/porep-1")["ETag"]
    listed = api.get("/api/v1/jobs/porep-1", headers={"If-None-Match": f'"other", W/{etag}'})
    assert listed.status_code == 304


def test_another_client_s_etag_reveals_nothing_of_its_job(api: Client, operator_api: Client) -> None:
    submit(operator_api, "theirs-1")
    etag = operator_api.get("/api/v1/jobs/theirs-1")["ETag"]
    assert api.get("/api/v1/jobs/theirs-1", headers={"If-None-Match": etag}).status_code == 404


def test_the_job_list_unchanged_is_a_304(api: Client) -> None:
    submit(api)
    first = api.get("/api/v1/jobs")
    assert api.get("/api/v1/jobs", headers={"If-None-Match": first["ETag"]}).status_code == 304


def test_a_new_job_changes_the_list_s_etag(api: Client) -> None:
    submit(api)
    etag = api.get("/api/v1/jobs")["ETag"]
    submit(api, "porep-2")
    after = api.get("/api/v1/jobs", headers={"If-None-Match": etag})
    assert after.status_code == 200 and after.json()["count"] == 2


def test_a_job_leaving_a_filtered_list_changes_its_etag(api: Client) -> None:
    submit(api)
    etag = api.get("/api/v1/jobs", {"state": "queued"})["ETag"]
    actions.cancel_job(ProofJob.objects.get(job_id="porep-1"))
    after = api.get("/api/v1/jobs", {"state": "queued"}, headers={"If-None-Match": etag})
    assert after.status_code == 200 and after.json()["count"] == 0


def test_another_page_of_the_same_list_has_its_own_etag(api: Client) -> None:
    submit(api)
    assert api.get("/api/v1/jobs", {"offset": 0})["ETag"] != api.get("/api/v1/jobs", {"offset": 1})["ETag"]


@pytest.mark.django_db(transaction=True)
def test_a_job_submitted_while_the_list_is_read_is_in_neither_its_count_nor_its_items(api: Client) -> None:
    submit(api)
    owner = ProofJob.objects.get(job_id="porep-1").client
    landed: list[str] = []

    def another_job() -> None:
        ProofJob.objects.create(job_id="porep-2", kind="porep-c2", client=owner)
        connections.close_all()

    def a_commit_after_the_first_count(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "COUNT(" in sql.upper() and not landed:
            landed.append(sql)
            writer = threading.Thread(target=another_job)  # its own connection: a real concurrent commit
            writer.start()
            writer.join()
        return result

    with connection.execute_wrapper(a_commit_after_the_first_count):
        page = api.get("/api/v1/jobs").json()
    assert landed and ProofJob.objects.count() == 2
    assert page["count"] == len(page["items"]) == 1
