"""While the database does not answer, the API says so as JSON 503 with Retry-After and the
console as a plain page, never Django's HTML 500; once it answers again, so does everything.

The outage is real: the connection's settings point at a database that is not there (a closed
port on PostgreSQL, a folder that does not exist for SQLite), so every connection the request
opens is refused, as while a server restarts."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from engine.ledger.tokens import issue_token

pytestmark = pytest.mark.django_db(transaction=True)


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


@contextmanager
def database_down() -> Iterator[None]:
    """Every connection opened inside is refused; the real settings come back afterwards."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
    else:
        connection.settings_dict.update(NAME="/nonexistent-folder/provingsite.sqlite3")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def outage() -> Iterator[None]:
    with database_down():
        yield


@pytest.fixture
def clients(db: None) -> dict[str, Client]:
    """An API token's client, an operator's and a logged-in console user's, made before the outage."""
    def bearer(raw: str) -> Client:
        return Client(headers={"Authorization": f"Bearer {raw}"}, raise_request_exception=False)

    staff = Client(raise_request_exception=False)
    staff.force_login(get_user_model().objects.create_superuser("ops", "", "pw-for-tests-only"))
    return {"api": bearer(issue_token("outage-client")[1]),
            "operator": bearer(issue_token("outage-ops", scope="operator")[1]), "staff": staff}


def answered_json_503(response: Any) -> bool:
    return (response.status_code == 503 and response["Content-Type"].startswith("application/json")
            and int(response["Retry-After"]) > 0 and response.json()["error"] == "unavailable")


def test_the_api_answers_json_503_with_retry_after_while_the_database_is_down(clients: dict[str, Client],
                                                                              outage: None) -> None:
    api, operator = clients["api"], clients["operator"]
    assert answered_json_503(api.get("/api/v1/jobs"))
    assert answered_json_503(api.get("/api/v1/jobs/some-job"))
    assert answered_json_503(api.post("/api/v1/jobs", {"kind": "porep-c2", "job_id": "during", "inputs": {
        "sector_seed": "11" * 32, "randomness": "2a" * 32}}, content_type="application/json"))
    assert answered_json_503(api.post("/api/v1/jobs/some-job/cancel"))
    assert answered_json_503(operator.get("/status"))
    unknown = Client(headers={"Authorization": "Bearer ps_" + "x" * 40}, raise_request_exception=False)
    assert answered_json_503(unknown.get("/api/v1/jobs"))  # the token itself cannot be looked up


def test_the_console_answers_a_plain_page_with_retry_after(clients: dict[str, Client], outage: None) -> None:
    staff = clients["staff"]
    for path in ("/", "/jobs/", "/jobs/some-job", "/admin/engine/proofjob/"):
        page = staff.get(path)
        assert page.status_code == 503 and int(page["Retry-After"]) > 0, path
        assert page["Content-Type"].startswith("text/html") and b"database is not answering" in page.content, path
    assert clients["operator"].get("/metrics").status_code == 503


def test_everything_answers_again_once_the_database_is_back(clients: dict[str, Client]) -> None:
    with database_down():
        assert answered_json_503(clients["api"].get("/api/v1/jobs"))
        assert clients["staff"].get("/").status_code == 503
    assert clients["api"].get("/api/v1/jobs").status_code == 200
    assert clients["staff"].get("/").status_code == 200


def test_a_server_error_that_is_not_an_outage_is_still_django_s_500() -> None:
    from django.test import RequestFactory

    from provingsite.outage import server_error

    try:
        raise RuntimeError("a bug, not an outage")
    except RuntimeError:
        response = server_error(RequestFactory().get("/api/v1/jobs"))
    assert response.status_code == 500 and "Retry-After" not in response
