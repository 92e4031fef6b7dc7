"""A token's limits hold on every way a job comes in (engine.ledger.submission): a built-in
kind, a custom upload, a registered circuit from a .wtns or from inputs, and a retry. A client
token limited to normal priority gets a 403 for critical, and its 65th active job the cap's
429, whichever path it takes; nothing is created by a refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.ledger.jobs import submit_job
from engine.ledger.tokens import issue_token
from engine.models import ApiToken, ProofJob
from engine.states import JobState, Priority, ProofKind
from tests.api.conftest import inputs
from tests.oracle.circom import CircomBuild, circom_product  # noqa: F401  the session fixture

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs" / "bn128"
PATHS = ["built-in kind", "custom upload", "circuit with a wtns",
         pytest.param("circuit with inputs", marks=[pytest.mark.node, pytest.mark.slow])]


def a_client_token() -> tuple[ApiToken, Client]:
    token, raw = issue_token("limited-client")  # a client's defaults: normal priority, 64 active jobs
    assert (token.max_priority, token.max_active_jobs) == (Priority.NORMAL, 64)
    return token, Client(headers={"Authorization": f"Bearer {raw}"})


def _file(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def _register(client: Client, **files: Path) -> str:
    response = client.post("/api/v1/circuits", {name: _file(path) for name, path in files.items()})
    assert response.status_code == 201, response.content
    return response.json()["id"]


def sender(path: str, client: Client, circom_product: Callable[[str], CircomBuild]) -> Callable[..., Any]:  # noqa: F811
    """A function that submits a job by ``path`` as ``client``: send(job_id, priority=None)."""
    if path == "built-in kind":
        def send(job_id: str, priority: str | None = None) -> Any:
            body = {"kind": "porep-c2", "job_id": job_id, "inputs": inputs(),
                    **({"priority": priority} if priority else {})}
            return client.post("/api/v1/jobs", body, content_type="application/json")
    elif path == "custom upload":
        def send(job_id: str, priority: str | None = None) -> Any:
            body = {"job_id": job_id, "zkey": _file(FIXTURES / "circuit.zkey"), "wtns": _file(FIXTURES / "witness.wtns"),
                    **({"priority": priority} if priority else {})}
            return client.post("/api/v1/jobs/custom", body)
    elif path == "circuit with a wtns":
        circuit = _register(client, zkey=FIXTURES / "circuit.zkey")

        def send(job_id: str, priority: str | None = None) -> Any:
            body = {"job_id": job_id, "wtns": _file(FIXTURES / "witness.wtns"), **({"priority": priority} if priority else {})}
            return client.post(f"/api/v1/circuits/{circuit}/jobs", body)
    else:
        build = circom_product("bn128")
        circuit = _register(client, zkey=build.zkey, wasm=build.wasm, r1cs=build.r1cs, sym=build.sym)

        def send(job_id: str, priority: str | None = None) -> Any:
            body = {"circuit": circuit, "job_id": job_id, "inputs": {"a": "3", "b": ["4", "5"]},
                    **({"priority": priority} if priority else {})}
            return client.post("/api/v1/jobs", body, content_type="application/json")
    return send


def fill_to_the_cap(token: ApiToken) -> None:
    for n in range(token.max_active_jobs or 0):
        submit_job(kind=ProofKind.CUSTOM, job_id=f"earlier-{n}", inputs={"n": n}, num_partitions=1, client=token)


@pytest.mark.parametrize("path", PATHS)
def test_a_normal_token_asking_for_critical_gets_403_on_every_path(
        path: str, uploads: Path, circom_product: Callable[[str], CircomBuild]) -> None:  # noqa: F811
    _, client = a_client_token()
    send = sender(path, client, circom_product)
    response = send("wants-critical", priority="critical")
    assert response.status_code == 403, response.content
    assert response.json()["field"] == "priority"
    assert not ProofJob.objects.filter(job_id="wants-critical").exists()
    assert send("asks-normal", priority="normal").status_code == 201


@pytest.mark.parametrize("path", PATHS)
def test_the_65th_active_job_gets_the_cap_s_429_on_every_path(
        path: str, uploads: Path, circom_product: Callable[[str], CircomBuild]) -> None:  # noqa: F811
    token, client = a_client_token()
    send = sender(path, client, circom_product)
    fill_to_the_cap(token)
    response = send("the-65th")
    assert response.status_code == 429, response.content
    assert response.json()["error"] == "too_many_active_jobs"
    assert ProofJob.objects.filter(client=token).count() == 64


def failed_job(token: ApiToken, priority: int | None = None) -> ProofJob:
    job, _ = submit_job(kind=ProofKind.CUSTOM, job_id="failed-once", inputs={}, num_partitions=1, client=token,
                        priority=priority)
    job.state = JobState.FAILED
    job.save(update_fields=["state"])
    return job


def test_retrying_a_job_at_a_priority_above_the_token_s_gets_403() -> None:
    # the job was made critical (by an operator, or before the token's limit was lowered)
    token, client = a_client_token()
    failed_job(token, priority=Priority.CRITICAL)
    response = client.post("/api/v1/jobs/failed-once/retry")
    assert response.status_code == 403, response.content
    assert ProofJob.objects.get(job_id="failed-once").state == JobState.FAILED


def test_retrying_a_job_at_its_kind_s_own_priority_is_no_request_for_it() -> None:
    token, client = a_client_token()
    job, _ = submit_job(kind=ProofKind.WINNING_POST, job_id="wpost-1", inputs=inputs(), num_partitions=1, client=token)
    assert job.priority == Priority.CRITICAL  # the farm's policy for winning-post, not the client's ask
    ProofJob.objects.filter(pk=job.pk).update(state=JobState.FAILED)
    assert client.post("/api/v1/jobs/wpost-1/retry").status_code == 200


def test_retrying_at_the_cap_gets_429_and_leaves_the_job_failed() -> None:
    token, client = a_client_token()
    failed_job(token)
    fill_to_the_cap(token)
    response = client.post("/api/v1/jobs/failed-once/retry")
    assert response.status_code == 429, response.content
    assert ProofJob.objects.get(job_id="failed-once").state == JobState.FAILED


def test_a_retry_under_the_cap_queues_the_job_again() -> None:
    token, client = a_client_token()
    failed_job(token)
    assert client.post("/api/v1/jobs/failed-once/retry").status_code == 200
    assert ProofJob.objects.get(job_id="failed-once").state == JobState.QUEUED
