"""Client tokens see the jobs they submitted and nothing of anyone else's; operator tokens
see every job."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from engine.ledger.tokens import issue_token
from engine.models import ApiToken, ProofJob, TokenScope
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db


@pytest.fixture
def other() -> Client:
    _, raw = issue_token("another-client")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def submit(client: Client, job_id: str, **extra: object) -> int:
    body = {"kind": "winning-post", "job_id": job_id, "inputs": inputs(**extra)}
    return int(client.post("/api/v1/jobs", body, content_type="application/json").status_code)


def test_a_client_sees_only_the_jobs_it_submitted(api: Client, other: Client) -> None:
    assert submit(api, "mine-1") == 201 and submit(other, "theirs-1") == 201
    assert [j["job_id"] for j in api.get("/api/v1/jobs").json()["items"]] == ["mine-1"]
    assert api.get("/api/v1/jobs/mine-1").status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/jobs/theirs-1", "/api/v1/jobs/theirs-1/proof",
                                  "/api/v1/jobs/theirs-1/proof/snarkjs"])
def test_another_client_s_job_is_not_found(api: Client, other: Client, path: str) -> None:
    assert submit(other, "theirs-1") == 201
    response = api.get(path)
    assert response.status_code == 404 and response.json()["field"] == "job_id"


def test_another_client_s_job_cannot_be_cancelled(api: Client, other: Client) -> None:
    assert submit(other, "theirs-1") == 201
    assert api.post("/api/v1/jobs/theirs-1/cancel").status_code == 404
    assert ProofJob.objects.get(job_id="theirs-1").state == "queued"


def test_resending_another_client_s_request_is_a_clash_that_reveals_nothing(api: Client, other: Client) -> None:
    assert submit(other, "theirs-1") == 201
    for extra in ({}, {"partitions": 1}):  # the very same request, and a different one
        response = api.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "theirs-1", "inputs": inputs(**extra)},
                            content_type="application/json")
        assert response.status_code == 409 and response.json()["field"] == "job_id"
        assert "already taken" in response.json()["detail"] and "winning-post" not in response.json()["detail"]


def test_an_operator_token_sees_every_job(api: Client, other: Client, operator_api: Client) -> None:
    assert submit(api, "mine-1") == 201 and submit(other, "theirs-1") == 201
    assert sorted(j["job_id"] for j in operator_api.get("/api/v1/jobs").json()["items"]) == ["mine-1", "theirs-1"]
    assert operator_api.get("/api/v1/jobs/theirs-1").status_code == 200


def test_createtoken_issues_client_tokens_unless_asked_for_an_operator(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("createtoken", "curio-east")
    call_command("createtoken", "grafana", "--operator")
    assert ApiToken.objects.get(name="curio-east").scope == TokenScope.CLIENT
    assert ApiToken.objects.get(name="grafana").scope == TokenScope.OPERATOR
    assert "operator token for grafana" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_tokens_issued_before_scopes_existed_keep_seeing_every_job() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("engine", "0001_initial")])
    old = executor.loader.project_state([("engine", "0001_initial")]).apps.get_model("engine", "ApiToken")
    old.objects.create(name="before", prefix="ps_x", token_hash="0" * 64)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert ApiToken.objects.get(name="before").scope == TokenScope.OPERATOR
    _, _ = issue_token("after")
    assert ApiToken.objects.get(name="after").scope == TokenScope.CLIENT
