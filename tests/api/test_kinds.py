"""GET /kinds describes the built-in kinds well enough to build a request from it alone."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def kinds(api: Client) -> dict[str, dict]:
    response = api.get("/api/v1/kinds")
    assert response.status_code == 200
    return {k["kind"]: k for k in response.json()}


def test_every_built_in_kind_is_described_with_its_partitions_and_priority(api: Client) -> None:
    described = kinds(api)
    assert set(described) == {"winning-post", "window-post", "porep-c2", "snap-update"}
    assert (described["porep-c2"]["partitions_min"], described["porep-c2"]["partitions_max"]) == (10, 10)
    assert described["window-post"]["partitions_min"] == 1 < described["window-post"]["partitions_max"]
    assert described["winning-post"]["default_priority"] == "critical"
    assert described["snap-update"]["circuit_id"] == "snap-update/tiny"


def test_a_request_built_from_the_description_alone_is_accepted(api: Client) -> None:
    for kind, described in kinds(api).items():
        inputs: dict[str, object] = {}
        for field in described["inputs"]:
            if field["required"]:
                assert field["type"] == "string" and re.fullmatch(field["pattern"], "ab" * 32)
                inputs[field["name"]] = "ab" * 32
        response = api.post("/api/v1/jobs", {"kind": kind, "job_id": f"from-the-description-{kind}", "inputs": inputs},
                            content_type="application/json")
        assert response.status_code == 201, response.content
        assert response.json()["num_partitions"] == described["partitions_min"]


def test_snap_update_says_it_needs_the_new_datas_seed_and_window_post_that_it_takes_a_count(api: Client) -> None:
    described = kinds(api)
    snap = {f["name"]: f for f in described["snap-update"]["inputs"]}
    window = {f["name"]: f for f in described["window-post"]["inputs"]}
    assert snap["data_seed"]["required"] and "data_seed" not in {f["name"] for f in described["porep-c2"]["inputs"]}
    assert not window["partitions"]["required"] and window["partitions"]["type"] == "integer"
    assert window["partitions"]["maximum"] == described["window-post"]["partitions_max"]
