"""One name, one format: every moment the API writes is ISO 8601 in UTC with milliseconds and a
"Z", whatever made the body; a curve is named both ways (snarkjs's identifier and the curve's
name), and snarkjs's own files keep snarkjs's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from engine.models import Callback, EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db

LOOKS_LIKE_A_MOMENT = re.compile(r"^\d{4}-\d\d-\d\dT")
ISO_UTC_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def moments(body: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a JSON body that starts as a date and time does, with where it is."""
    if isinstance(body, dict):
        for key, value in body.items():
            yield from moments(value, f"{path}.{key}")
    elif isinstance(body, list):
        for i, value in enumerate(body):
            yield from moments(value, f"{path}[{i}]")
    elif isinstance(body, str) and LOOKS_LIKE_A_MOMENT.match(body):
        yield path, body


@pytest.fixture
def a_job_with_every_moment(operator_api: Client) -> str:
    """A job with a deadline, started and finished at moments with and without a fraction of a
    second, one partition claimed and one notice attempted (its attempt's moment recorded as
    Python wrote it before this rule: "+00:00" and microseconds)."""
    due = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    answer = operator_api.post("/api/v1/jobs", {"kind": "porep-c2", "job_id": "moments", "inputs": inputs(),
                                                "deadline": due.isoformat().replace("+00:00", "Z")},
                               content_type="application/json")
    assert answer.status_code == 201, answer.content
    whole_second = timezone.now().replace(microsecond=0)
    ProofJob.objects.filter(job_id="moments").update(state=JobState.RUNNING, started_at=whole_second)
    host = EngineHost.objects.create(name="moments-host", started_at=whole_second, heartbeat_at=timezone.now())
    Partition.objects.filter(job__job_id="moments", index=0).update(
        state=PartitionState.SYNTHESIZING, host=host, claimed_at=timezone.now().replace(microsecond=123456),
        synth_started_at=timezone.now())
    Callback.objects.create(job=ProofJob.objects.get(job_id="moments"), url="https://example.org/done", event="done",
                            next_at=timezone.now(), attempts=[{"at": "2026-12-06T22:05:13.123456+00:00",
                                                               "outcome": "HTTP 503"}])
    return "moments"


def test_every_moment_the_api_writes_is_iso_8601_in_utc_with_milliseconds_and_a_z(
        operator_api: Client, a_job_with_every_moment: str) -> None:
    bodies = {url: operator_api.get(url).json() for url in (
        f"/api/v1/jobs/{a_job_with_every_moment}", "/api/v1/jobs", "/status")}
    written = [(url, *found) for url, body in bodies.items() for found in moments(body)]
    wrong = [item for item in written if not ISO_UTC_MS.match(item[2])]
    assert not wrong, wrong
    where = {path for _, path, _ in written}
    # the moments of the job, its partition, its notice, the farm's own: each one was looked at
    for path in (".submitted_at", ".started_at", ".deadline", ".partitions[0].claimed_at",
                 ".callbacks[0].attempts[0].at", ".generated_at"):
        assert path in where, sorted(where)


def test_a_job_names_its_curve_as_snarkjs_does_and_by_its_name(api: Client) -> None:
    body = api.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "named", "inputs": inputs()},
                    content_type="application/json").json()
    listed = api.get("/api/v1/jobs").json()["items"][0]
    assert (body["curve"], body["curve_name"]) == ("bls12381", "BLS12-381")
    assert (listed["curve"], listed["curve_name"]) == ("bls12381", "BLS12-381")


def test_a_circuit_id_of_each_family_is_explained_in_the_api_schema(api: Client) -> None:
    schema = api.get("/api/v1/openapi.json").json()["components"]["schemas"]
    described = schema["JobOut"]["properties"]["circuit_id"]["description"]
    assert "circom/" in described and "custom/" in described and "<kind>/<scale>" in described
    assert "BN254" in schema["JobOut"]["properties"]["curve_name"]["description"]
