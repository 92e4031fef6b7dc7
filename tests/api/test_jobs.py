"""The jobs endpoints: every endpoint, every documented error, in the one error shape."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState, Priority
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db


def submit(api: Client, **body: object):
    payload = {"kind": "porep-c2", "job_id": "porep-1", "inputs": inputs(), **body}
    return api.post("/api/v1/jobs", payload, content_type="application/json")


def assert_error(response, status: int, field: str | None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error", "field", "detail"}
    assert body["field"] == field, body
    return body


# ---- submitting ----------------------------------------------------------------------------


def test_a_new_request_creates_a_queued_job_with_its_partitions(api: Client) -> None:
    response = submit(api)
    assert response.status_code == 201
    body = response.json()
    assert (body["job_id"], body["kind"], body["state"], body["priority"]) == ("porep-1", "porep-c2", "queued", "normal")
    assert [p["index"] for p in body["partitions"]] == list(range(10))
    client = ProofJob.objects.get(job_id="porep-1").client
    assert client is not None and client.name == "curio-test"


def test_the_same_request_again_returns_the_existing_job_with_200(api: Client) -> None:
    first = submit(api).json()
    again = submit(api)
    assert again.status_code == 200
    assert again.json()["submitted_at"] == first["submitted_at"]
    assert ProofJob.objects.count() == 1


def test_a_different_request_under_a_used_id_is_a_409_naming_the_clash(api: Client) -> None:
    submit(api)
    body = assert_error(submit(api, inputs=inputs(randomness="3b" * 32)), 409, "job_id")
    assert "porep-1" in body["detail"] and body["error"] == "conflict"


def test_a_window_post_takes_the_partitions_it_asks_for(operator_api: Client) -> None:
    response = submit(operator_api, kind="window-post", job_id="wpost-7", inputs=inputs(partitions=3))
    assert response.status_code == 201
    assert response.json()["num_partitions"] == 3 and response.json()["priority"] == "high"


@pytest.mark.parametrize("priority, expected", [("critical", Priority.CRITICAL), (3, Priority.LOW), ("1", Priority.HIGH)])
def test_a_priority_override_may_be_a_name_or_a_number(operator_api: Client, priority: object, expected: int) -> None:
    assert submit(operator_api, priority=priority).status_code == 201  # operators may ask for any priority
    assert ProofJob.objects.get(job_id="porep-1").priority == expected


@pytest.mark.parametrize("priority", ["urgent", 7, -1, True])
def test_an_unknown_priority_is_refused(api: Client, priority: object) -> None:
    assert_error(submit(api, priority=priority), 400, "priority")


@pytest.mark.parametrize("job_id", ["", "has space", "slash/inside", "x" * 201, "-leading-dash", "custom", "ünïcode"])
def test_a_malformed_job_id_is_refused(api: Client, job_id: str) -> None:
    assert_error(submit(api, job_id=job_id), 400, "job_id")


def test_an_unknown_kind_is_refused_naming_kind(api: Client) -> None:
    assert_error(submit(api, kind="sha-proof"), 400, "kind")


def test_a_missing_input_is_refused_naming_the_input(api: Client) -> None:
    assert_error(submit(api, inputs={"sector_seed": "11" * 32}), 400, "inputs.randomness")


def test_a_malformed_input_is_refused_naming_the_input(api: Client) -> None:
    assert_error(submit(api, inputs=inputs(sector_seed="zz")), 400, "inputs.sector_seed")


def test_inputs_that_are_not_an_object_are_refused(api: Client) -> None:
    assert_error(submit(api, inputs=[1, 2]), 400, "inputs")


def test_a_body_that_is_not_json_is_refused(api: Client) -> None:
    response = api.post("/api/v1/jobs", "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"] == "invalid"


def test_a_missing_field_is_named(api: Client) -> None:
    response = api.post("/api/v1/jobs", {"kind": "porep-c2"}, content_type="application/json")
    assert_error(response, 400, "job_id")


# ---- reading -----------------------------------------------------------------------------


def test_a_job_reads_back_with_partition_states_and_timings(api: Client) -> None:
    submit(api)
    start = timezone.now() - timedelta(seconds=2)
    worker = Worker.objects.create(host=EngineHost.objects.create(name="gpu-host"), device="cuda:0", ordinal=0)
    Partition.objects.filter(job__job_id="porep-1", index=0).update(
        state=PartitionState.GPU, worker=worker, host=worker.host, synth_started_at=start,
        synth_finished_at=start + timedelta(milliseconds=587))
    body = api.get("/api/v1/jobs/porep-1").json()
    assert body["partitions"][0]["state"] == "gpu"
    assert body["partitions"][0]["synth_ms"] == 587
    assert body["proof"] is None


def test_a_done_job_carries_its_proof_and_public_inputs(api: Client) -> None:
    submit(api)
    ProofJob.objects.filter(job_id="porep-1").update(state=JobState.DONE, proof=[{"a": 1}], public_inputs=[["7"]],
                                                     verified=True)
    body = api.get("/api/v1/jobs/porep-1").json()
    assert body["proof"] == [{"a": 1}] and body["public_inputs"] == [["7"]] and body["verified"] is True


def test_an_unknown_job_is_a_404_naming_the_job_id(api: Client) -> None:
    assert_error(api.get("/api/v1/jobs/nope"), 404, "job_id")


def test_the_list_filters_by_kind_state_and_time_and_pages(api: Client) -> None:
    for n in range(5):
        submit(api, job_id=f"porep-{n}")
    submit(api, kind="winning-post", job_id="win-1")
    ProofJob.objects.filter(job_id="porep-0").update(state=JobState.DONE)
    assert api.get("/api/v1/jobs", {"kind": "winning-post"}).json()["count"] == 1
    assert [j["job_id"] for j in api.get("/api/v1/jobs", {"state": "done"}).json()["items"]] == ["porep-0"]
    query: dict[str, str | int] = {"kind": "porep-c2", "limit": 2, "offset": 2}
    page = api.get("/api/v1/jobs", query).json()
    assert (page["count"], len(page["items"])) == (5, 2)
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert api.get("/api/v1/jobs", {"since": later}).json()["count"] == 0


@pytest.mark.parametrize("query, field", [({"kind": "nope"}, "kind"), ({"state": "stuck"}, "state"),
                                          ({"limit": 0}, "limit"), ({"limit": "many"}, "limit"),
                                          ({"offset": -1}, "offset"), ({"since": "yesterday"}, "since")])
def test_a_bad_list_filter_is_refused_naming_it(api: Client, query: dict, field: str) -> None:
    assert_error(api.get("/api/v1/jobs", query), 400, field)


# ---- proofs ------------------------------------------------------------------------------


def test_the_proof_of_a_job_not_done_is_a_409(api: Client) -> None:
    submit(api)
    assert_error(api.get("/api/v1/jobs/porep-1/proof"), 409, "job_id")
    assert_error(api.get("/api/v1/jobs/porep-1/proof/snarkjs"), 409, "job_id")


def test_the_proof_of_a_done_job_lists_every_partition(api: Client) -> None:
    submit(api)
    Partition.objects.filter(job__job_id="porep-1").update(proof={"pi": 1}, public_inputs=["5"])
    ProofJob.objects.filter(job_id="porep-1").update(state=JobState.DONE, proof=[{"pi": 1}] * 10)
    body = api.get("/api/v1/jobs/porep-1/proof").json()
    assert [p["index"] for p in body["partitions"]] == list(range(10))
    assert body["partitions"][3]["proof"] == {"pi": 1}


# ---- cancel and retry -------------------------------------------------------------------


def test_cancelling_a_queued_job_cancels_it(api: Client) -> None:
    submit(api)
    response = api.post("/api/v1/jobs/porep-1/cancel")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"


def test_cancelling_a_finished_job_is_a_409(api: Client) -> None:
    submit(api)
    ProofJob.objects.filter(job_id="porep-1").update(state=JobState.DONE)
    assert_error(api.post("/api/v1/jobs/porep-1/cancel"), 409, "job_id")


def test_retrying_a_cancelled_job_queues_it_again(api: Client) -> None:
    submit(api)
    api.post("/api/v1/jobs/porep-1/cancel")
    response = api.post("/api/v1/jobs/porep-1/retry")
    assert response.status_code == 200
    assert response.json()["state"] == "queued"
    assert set(Partition.objects.filter(job__job_id="porep-1").values_list("state", flat=True)) == {"pending"}


def test_retrying_a_queued_job_is_a_409(api: Client) -> None:
    submit(api)
    assert_error(api.post("/api/v1/jobs/porep-1/retry"), 409, "job_id")


def test_cancel_and_retry_of_an_unknown_job_are_404(api: Client) -> None:
    assert_error(api.post("/api/v1/jobs/ghost/cancel"), 404, "job_id")
    assert_error(api.post("/api/v1/jobs/ghost/retry"), 404, "job_id")


def test_a_body_too_large_to_be_a_request_is_a_413(api: Client, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = submit(api, inputs=inputs(padding="x" * 4096))
    assert_error(response, 413, "body")


def test_a_job_id_with_a_nul_in_the_path_is_simply_not_found(api: Client) -> None:
    assert_error(api.get("/api/v1/jobs/a%00b"), 404, "job_id")


def test_the_api_docs_are_served_from_our_own_static_files(anonymous: Client) -> None:
    import re

    from django.contrib.staticfiles import finders

    response = anonymous.get("/api/v1/docs")
    assert response.status_code == 200
    assets = re.findall(r'(?:href|src)="([^"]+)"', response.content.decode())
    assert assets and all(a.startswith("/static/") for a in assets), f"assets from elsewhere: {assets}"
    for asset in assets:  # an offline GPU host has every one of them
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not among the static files"


# ---- the published request body: a built-in kind's job or a registered circuit's ----------


def submission_schema(api: Client) -> dict:
    doc = api.get("/api/v1/openapi.json").json()
    body = doc["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**body, "components": doc["components"]}  # its $refs resolve against this root


def test_the_openapi_document_describes_a_circom_submission_and_a_built_in_one(api: Client) -> None:
    import jsonschema

    schema = submission_schema(api)
    jsonschema.validate({"circuit": "3f" * 32, "job_id": "multiplier-42", "inputs": {"a": "3", "b": "11"}}, schema)
    jsonschema.validate({"kind": "porep-c2", "job_id": "porep-1", "inputs": inputs()}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"kind": "porep-c2", "circuit": "3f" * 32, "job_id": "both", "inputs": {}}, schema)


def test_a_body_with_both_kind_and_circuit_is_told_to_choose(api: Client) -> None:
    body = assert_error(submit(api, circuit="3f" * 32), 400, "circuit")
    assert "either kind" in body["detail"] and "not both" in body["detail"]


@pytest.mark.parametrize("body", [[], 5])
def test_a_body_that_is_not_an_object_is_refused_naming_the_body(api: Client, body: object) -> None:
    assert_error(api.post("/api/v1/jobs", body, content_type="application/json"), 400, "body")
