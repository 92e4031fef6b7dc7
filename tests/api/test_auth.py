"""Token enforcement: no token, a bad token and a revoked token are all refused with 401."""

from __future__ import annotations

import pytest
from django.test import Client

from engine.ledger.tokens import hash_token, issue_token, revoke_token
from engine.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_request_without_a_token_is_refused_naming_the_header(anonymous: Client) -> None:
    response = anonymous.get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.json()["field"] == "Authorization"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_made_up_token_is_refused(anonymous: Client) -> None:
    response = anonymous.get("/api/v1/jobs", headers={"Authorization": "Bearer ps_not-a-real-token"})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


def test_a_token_sent_under_another_scheme_is_refused(token: str, anonymous: Client) -> None:
    assert anonymous.get("/api/v1/jobs", headers={"Authorization": f"Basic {token}"}).status_code == 401


def test_a_revoked_token_is_refused(token: str, api: Client) -> None:
    assert api.get("/api/v1/jobs").status_code == 200
    revoke_token("curio-test")
    assert api.get("/api/v1/jobs").status_code == 401


def test_only_the_hash_of_a_token_is_stored() -> None:
    record, raw = issue_token("lotus")
    assert raw.startswith("ps_") and len(raw) > 40
    stored = ApiToken.objects.get(pk=record.pk)
    assert stored.token_hash == hash_token(raw) and raw not in (stored.token_hash, stored.prefix)
    assert raw.startswith(stored.prefix)


def test_a_used_token_records_when_it_was_last_used(token: str, api: Client) -> None:
    api.get("/api/v1/jobs")
    assert ApiToken.objects.get(name="curio-test").last_used_at is not None


def test_the_openapi_schema_is_public_so_clients_can_discover_the_api(anonymous: Client) -> None:
    response = anonymous.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert "/api/v1/jobs" in response.json()["paths"]
