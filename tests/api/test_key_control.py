"""POST /api/v1/keys/{circuit}/preload and /evict: operator tokens write one request per host,
judged from the records; refusals name what is at fault. /status and /metrics show each key's
residency tier as the engine recorded it."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from engine.api.status import status_schema
from engine.ledger.key_requests import key_bytes
from engine.models import EngineHost, KeyRequest
from engine.status.host_report import KeyReport

pytestmark = pytest.mark.django_db
KEY = "winning-post/tiny"


def host(name: str, budget: int, keys: list[KeyReport] | None = None) -> EngineHost:
    now = timezone.now()
    return EngineHost.objects.create(name=name, started_at=now, heartbeat_at=now, memory_budget_bytes=budget,
                                     memory_total_bytes=budget, key_cache=[k.to_json() for k in keys or []])


def post(client: Client, circuit: str, action: str, **body: object):
    return client.post(f"/api/v1/keys/{circuit}/{action}", body, content_type="application/json")


def test_a_preload_that_fits_writes_a_pending_request_for_every_running_host(operator_api: Client) -> None:
    host("gpu-a", 1 << 30), host("gpu-b", 1 << 30)
    response = post(operator_api, KEY, "preload", tier="warm")
    assert response.status_code == 202, response.content
    assert [(r["host"], r["tier"], r["state"]) for r in response.json()["requests"]] == \
        [("gpu-a", "warm", "pending"), ("gpu-b", "warm", "pending")]
    assert KeyRequest.objects.filter(circuit_id=KEY, action="preload", state="pending").count() == 2


def test_a_preload_that_does_not_fit_is_a_409_naming_the_free_bytes_and_the_need(operator_api: Client) -> None:
    need = key_bytes(KEY)
    host("gpu-a", need + (1 << 20), [KeyReport("porep-c2/tiny", 2 << 20)])  # its other key leaves too little
    response = post(operator_api, KEY, "preload", tier="hot", host="gpu-a")
    assert response.status_code == 409
    body = response.json()
    assert (body["host"], body["free_bytes"], body["needed_bytes"]) == ("gpu-a", need - (1 << 20), need)
    assert f"({need - (1 << 20)} bytes) of its memory budget free" in body["detail"]
    assert not KeyRequest.objects.exists()


def test_an_evict_writes_a_request_to_the_tier_asked(operator_api: Client) -> None:
    host("gpu-a", 1 << 30, [KeyReport(KEY, 1 << 20)])
    response = post(operator_api, KEY, "evict", tier="warm", host="gpu-a")
    assert response.status_code == 202
    assert KeyRequest.objects.get().tier == "warm"


@pytest.mark.parametrize(("circuit", "body", "status", "field"), [
    ("nonsense/tiny", {"tier": "hot"}, 404, "circuit"),
    ("circom/" + "ab" * 32, {"tier": "hot"}, 404, "circuit"),
    (KEY, {"tier": "cold"}, 400, "tier"),
    (KEY, {"tier": "hot", "host": "nowhere"}, 400, "host"),
])
def test_a_bad_preload_names_what_is_wrong(operator_api: Client, circuit: str, body: dict, status: int,
                                           field: str) -> None:
    host("gpu-a", 1 << 30)
    response = post(operator_api, circuit, "preload", **body)
    assert response.status_code == status and response.json()["field"] == field
    if status == 404:
        assert circuit in response.json()["detail"]


def test_a_client_token_may_not_control_keys(api: Client) -> None:
    host("gpu-a", 1 << 30)
    assert post(api, KEY, "preload", tier="hot").status_code == 403
    assert post(api, KEY, "evict", tier="cold").status_code == 403


def test_a_client_token_is_refused_before_its_body_is_read(api: Client) -> None:
    host("gpu-a", 1 << 30)
    response = api.post(f"/api/v1/keys/{KEY}/preload", "{not json", content_type="application/json")
    assert response.status_code == 403 and response.json()["field"] == "Authorization"


@pytest.mark.parametrize(("action", "tier"), [("preload", "hot"), ("evict", "cold")])
def test_a_request_without_a_body_takes_the_default_tier_on_every_host(operator_api: Client, action: str,
                                                                       tier: str) -> None:
    host("gpu-a", 1 << 30)
    response = operator_api.generic("POST", f"/api/v1/keys/{KEY}/{action}")  # as `curl -X POST` sends it
    assert response.status_code == 202, response.content
    assert [(r["action"], r["tier"], r["host"]) for r in response.json()["requests"]] == [(action, tier, "gpu-a")]


def test_status_and_metrics_show_each_keys_tier(operator_api: Client, anonymous: Client) -> None:
    used = datetime(2026, 1, 1, tzinfo=UTC)
    host("gpu-a", 1 << 30, [KeyReport(KEY, 1 << 20, tier="hot", load_seconds=0.5, last_used_at=used),
                            KeyReport("porep-c2/tiny", 3 << 10, tier="warm", mapped_bytes=5 << 20)])
    document = operator_api.get("/status").json()
    jsonschema.validate(document, status_schema(), format_checker=jsonschema.FormatChecker())
    srs = {a["circuit_id"]: a for a in document["allocations"]["srs"]}
    assert (srs[KEY]["tier"], srs[KEY]["load_secs"]) == ("hot", 0.5) and srs[KEY]["last_used_secs_ago"] > 0
    assert (srs["porep-c2/tiny"]["tier"], srs["porep-c2/tiny"]["mapped_bytes"]) == ("warm", 5 << 20)

    text = anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    tiers = {(s.labels["circuit"], s.labels["tier"]): s.value for s in families["provingsite_key_bytes"].samples}
    assert tiers == {(KEY, "hot"): 1 << 20, ("porep-c2/tiny", "warm"): 3 << 10}
