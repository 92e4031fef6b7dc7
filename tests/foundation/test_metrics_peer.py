"""The /metrics allow-list goes by the TCP peer; X-Forwarded-For only from a trusted proxy."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.test import Client

from engine.api.peer import client_address
from tests.foundation.webserver import WebServer, migrated_server, request, server_env

ALLOWED = "198.51.100.7"  # the scraper's address: never this test's


def asgi_request(peer: str, forwarded: str | None = None) -> ASGIRequest:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "headers": headers,
             "client": (peer, 40000), "server": ("127.0.0.1", 8000)}
    return ASGIRequest(scope, io.BytesIO())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    data = tmp_path_factory.mktemp("metrics-peer")
    yield from migrated_server(data, server_env(data, PROVINGSITE_METRICS_ALLOW=ALLOWED))


def test_a_forwarded_header_naming_an_allowed_address_does_not_open_metrics(server: WebServer) -> None:
    spoofed = request(server, "GET", "/metrics", {"X-Forwarded-For": f"{ALLOWED}, 127.0.0.1"})
    assert spoofed.status == 403


def test_the_peer_is_the_client_when_no_proxy_is_trusted(settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "TRUSTED_PROXIES": []}
    assert client_address(asgi_request("10.0.0.5", ALLOWED)) == "10.0.0.5"


def test_a_trusted_proxy_is_believed_for_the_hop_it_appended_only(settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "TRUSTED_PROXIES": ["10.0.0.5"]}
    assert client_address(asgi_request("10.0.0.5", f"{ALLOWED}, 203.0.113.9")) == "203.0.113.9"


@pytest.mark.django_db
def test_metrics_behind_a_trusted_proxy_go_by_the_real_client(settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "METRICS_TOKEN": "", "METRICS_ALLOW": [ALLOWED],
                            "TRUSTED_PROXIES": ["10.0.0.5"]}
    client = Client()
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR=f"{ALLOWED}, 203.0.113.9").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR=f"203.0.113.9, {ALLOWED}").status_code == 200
