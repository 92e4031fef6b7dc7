"""Conditional job polls answered before Django: a 304 from one query on a worker thread when
the job is unchanged for this caller, and every other poll passed on to the API unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.asgi import get_asgi_application
from django.test import Client

from engine.api.auth import LIVE_TOKENS, token_for
from engine.api.poll import ConditionalPolls, unchanged_etag, unchanged_page_etag
from engine.ledger import jobs as actions
from engine.ledger.tokens import issue_token, revoke_token
from engine.models import ProofJob
from tests.api.conftest import inputs

# The poll path reads on its own thread, with its own connection: the test's rows must be
# committed for it to see them.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_token_cache() -> None:
    LIVE_TOKENS.clear()


def client_token(name: str, scope: str = "client") -> str:
    return issue_token(name, scope=scope)[1]


def submit(raw: str, job_id: str = "porep-1") -> str:
    """Submit a job as ``raw``'s client; its ETag as the API sends it."""
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    body = {"kind": "porep-c2", "job_id": job_id, "inputs": inputs()}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201
    return str(api.get(f"/api/v1/jobs/{job_id}")["ETag"])


def poll(polls: ConditionalPolls, path: str, headers: dict[str, str]) -> tuple[int, dict[bytes, bytes]]:
    headers = {"Host": "testserver", **headers}
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5)}

    async def exchange() -> list[dict[str, Any]]:
        talk = ApplicationCommunicator(polls, scope)
        await talk.send_input({"type": "http.request", "body": b""})
        start = await talk.receive_output(10)
        await talk.receive_output(10)
        return [start]

    start = async_to_sync(exchange)()[0]
    return start["status"], {bytes(k).lower(): bytes(v) for k, v in start["headers"]}


@pytest.fixture
def polls() -> ConditionalPolls:
    return ConditionalPolls(get_asgi_application())


def test_an_unchanged_job_is_answered_304_with_the_view_s_etag_without_reaching_django(
        polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    etag = submit(raw)
    status, headers = poll(polls, "/api/v1/jobs/porep-1", {"Authorization": f"Bearer {raw}", "If-None-Match": etag})
    assert (status, headers[b"etag"].decode()) == (304, etag)
    assert polls.answered == 1


def test_a_changed_job_goes_on_to_the_api_which_sends_it_whole(polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    etag = submit(raw)
    actions.cancel_job(ProofJob.objects.get(job_id="porep-1"))
    status, headers = poll(polls, "/api/v1/jobs/porep-1", {"Authorization": f"Bearer {raw}", "If-None-Match": etag})
    assert status == 200 and headers[b"etag"].decode() != etag
    assert polls.answered == 0


def test_another_client_s_job_goes_on_to_the_api_and_is_not_found(polls: ConditionalPolls) -> None:
    etag = submit(client_token("owner"))
    stranger = client_token("stranger")
    status, _ = poll(polls, "/api/v1/jobs/porep-1", {"Authorization": f"Bearer {stranger}", "If-None-Match": etag})
    assert (status, polls.answered) == (404, 0)


def test_an_operator_token_gets_the_304_for_any_client_s_job() -> None:
    etag = submit(client_token("owner"))
    assert unchanged_etag(client_token("dashboard", scope="operator"), "porep-1", {etag}) == etag


def test_an_unknown_token_goes_on_to_the_api_and_is_refused(polls: ConditionalPolls) -> None:
    etag = submit(client_token("poller"))
    status, _ = poll(polls, "/api/v1/jobs/porep-1", {"Authorization": "Bearer ps_made-up", "If-None-Match": etag})
    assert (status, polls.answered) == (401, 0)


def test_a_token_over_its_rate_goes_on_to_the_api_for_its_429(polls: ConditionalPolls, settings: Any) -> None:
    raw = client_token("poller")
    etag = submit(raw)
    settings.PROVINGSITE = {**settings.PROVINGSITE, "API_RATE": 0.001, "API_BURST": 1}
    headers = {"Authorization": f"Bearer {raw}", "If-None-Match": etag}
    first, _ = poll(polls, "/api/v1/jobs/porep-1", headers)
    second, second_headers = poll(polls, "/api/v1/jobs/porep-1", headers)
    assert (first, second) == (304, 429) and b"retry-after" in second_headers


def test_a_revoked_token_is_never_answered_from_the_token_cache() -> None:
    raw = client_token("leaving")
    assert token_for(raw) is not None
    revoke_token("leaving")
    assert token_for(raw) is None


def test_a_poll_without_if_none_match_is_left_to_the_api(polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    submit(raw)
    status, _ = poll(polls, "/api/v1/jobs/porep-1", {"Authorization": f"Bearer {raw}"})
    assert (status, polls.answered) == (200, 0)


def test_an_unchanged_job_list_is_answered_304_with_the_view_s_etag(polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    submit(raw)
    etag = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/v1/jobs?limit=20")["ETag"]
    assert unchanged_page_etag(raw, "limit=20", {etag}) == etag
    assert unchanged_page_etag(raw, "limit=21", {etag}) is None  # another page, another tag


def test_a_job_list_query_the_api_refuses_goes_on_to_the_api(polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    assert unchanged_page_etag(raw, "limit=0", {"*"}) is None
    assert unchanged_page_etag(raw, "kind=nonsense", {"*"}) is None


def test_a_poll_for_a_host_django_does_not_serve_is_left_to_django_s_400(polls: ConditionalPolls) -> None:
    raw = client_token("poller")
    etag = submit(raw)
    headers = {"Authorization": f"Bearer {raw}", "If-None-Match": etag, "Host": "evil.example"}
    status, _ = poll(polls, "/api/v1/jobs/porep-1", headers)
    assert (status, polls.answered) == (400, 0)


def test_a_plain_http_poll_is_left_to_django_s_https_redirect(settings: Any) -> None:
    raw = client_token("poller")
    etag = submit(raw)
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    polls = ConditionalPolls(get_asgi_application())  # Django's middleware reads the settings once
    headers = {"Authorization": f"Bearer {raw}", "If-None-Match": etag}
    assert poll(polls, "/api/v1/jobs/porep-1", headers)[0] == 301
    assert poll(polls, "/api/v1/jobs/porep-1", {**headers, "X-Forwarded-Proto": "https"})[0] == 304
