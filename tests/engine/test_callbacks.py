"""A client is told when its job ends: a signed POST to its callback URL, tried again after a
refusal, every attempt on the record, and never holding the job back."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from engine.ledger.jobs import cancel_job
from engine.ledger.tokens import issue_token
from engine.models import Callback, ProofJob
from engine.pipeline.notify import deliver_due
from engine.states import JobState
from tests.engine.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def receivers_on_this_machine_allowed(settings: Any) -> None:
    """The test's receivers listen on 127.0.0.1, as an operator's own would be let through."""
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CALLBACK_ALLOW": ["127.0.0.1"]}


@dataclass
class Receiver:
    """An HTTP endpoint on 127.0.0.1 that answers with the next status of ``answers`` (then 200)."""

    answers: list[int] = field(default_factory=list)
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""
    location: str = ""  # where a 3xx answer points


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from listening()


@pytest.fixture
def elsewhere() -> Iterator[Receiver]:
    """A second receiver: where a redirect would lead."""
    yield from listening()


def listening() -> Iterator[Receiver]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  the http.server name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.received.append((dict(self.headers), body))
            status = got.answers.pop(0) if got.answers else 200
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", got.location)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}/proof-done"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield got
    server.shutdown()


def client_with_callback(url: str) -> tuple[Client, str]:
    _, raw = issue_token("notified", callback_url=url)
    return Client(headers={"Authorization": f"Bearer {raw}"}), raw


def submitted(api: Client, job_id: str, **extra: Any) -> ProofJob:
    from engine.ledger.demo import demo_inputs

    body = {"kind": "winning-post", "job_id": job_id, "inputs": demo_inputs("winning-post"), **extra}
    response = api.post("/api/v1/jobs", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return ProofJob.objects.get(job_id=job_id)


def signed_by(token: str, headers: dict[str, str], body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in headers["X-Provingsite-Signature"].split(","))
    key = hashlib.sha256(token.encode()).hexdigest().encode()
    expected = hmac.new(key, f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


def test_a_cancelled_job_is_posted_signed_to_the_tokens_callback(receiver: Receiver) -> None:
    api, token = client_with_callback(receiver.url)
    job = submitted(api, "told")
    cancel_job(job)
    assert deliver_due() == 1
    ((headers, body),) = receiver.received
    assert json.loads(body)["state"] == "cancelled" and json.loads(body)["job_id"] == "told"
    assert signed_by(token, headers, body)
    assert Callback.objects.get().delivered_at is not None


def test_a_refused_delivery_is_tried_again_after_its_back_off_and_both_attempts_are_shown(receiver: Receiver) -> None:
    receiver.answers = [503]
    api, _ = client_with_callback("http://127.0.0.1:9/never")  # the job's own URL wins over the token's
    job = submitted(api, "retried", callback_url=receiver.url)
    cancel_job(job)
    assert deliver_due() == 1
    notice = Callback.objects.get()
    assert notice.delivered_at is None and notice.next_at > timezone.now()  # backing off
    assert deliver_due() == 0  # not due yet
    Callback.objects.filter(pk=notice.pk).update(next_at=timezone.now())
    assert deliver_due() == 1
    shown = api.get("/api/v1/jobs/retried").json()["callbacks"]
    assert [a["outcome"] for a in shown[0]["attempts"]] == ["refused: HTTP 503", "delivered: HTTP 200"]
    assert shown[0]["delivered_at"]
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "", "pw-for-tests-only"))
    page = staff.get("/jobs/retried").content.decode()
    assert 'id="job-callbacks"' in page and "HTTP 503" in page and "delivered" in page


def test_a_callback_url_that_is_not_http_is_refused_naming_it(receiver: Receiver) -> None:
    api, _ = client_with_callback(receiver.url)
    from engine.ledger.demo import demo_inputs

    response = api.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "bad-url", "callback_url": "file:///etc",
                                         "inputs": demo_inputs("winning-post")}, content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "callback_url"


@pytest.mark.slow
def test_an_engine_tells_the_client_of_a_proved_job_without_the_job_waiting_on_it(
        receiver: Receiver, start_engine: Callable[..., Any]) -> None:
    api, token = client_with_callback(receiver.url)
    job = submitted(api, "proved-and-told")
    start_engine()
    wait_until(lambda: Callback.objects.filter(delivered_at__isnull=False).exists(), timeout=60)
    job.refresh_from_db()
    notice = Callback.objects.get()
    assert job.state == JobState.DONE and notice.event == "done"
    assert job.finished_at is not None and notice.delivered_at is not None
    assert job.finished_at <= notice.delivered_at  # the job ended first
    ((headers, body),) = receiver.received
    assert json.loads(body)["vk_digest"] == job.vk_digest and signed_by(token, headers, body)


# ---- where a callback may go (engine.ledger.callback_targets) --------------------------------


def notice_of(url: str) -> Callback:
    """A job of a token whose default callback is ``url`` (an operator's setting: not checked
    at submission, so delivery must check it), cancelled: its notice is due."""
    api, _ = client_with_callback(url)
    cancel_job(submitted(api, "told"))
    return Callback.objects.get()


def outcomes(notice: Callback) -> list[str]:
    notice.refresh_from_db()
    return [attempt["outcome"] for attempt in notice.attempts]


def test_a_callback_to_an_address_not_allowed_is_refused_at_delivery_and_never_sent(
        receiver: Receiver, settings: Any) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CALLBACK_ALLOW": []}
    notice = notice_of(receiver.url)
    assert deliver_due() == 1
    assert outcomes(notice) == ["refused: 127.0.0.1 is not a public address"]
    assert notice.gave_up_at is not None and receiver.received == []  # given up at once: the rule stands


def test_a_port_outside_1_to_65535_is_refused_at_delivery() -> None:
    notice = notice_of("http://127.0.0.1:0/done")
    assert deliver_due() == 1
    assert outcomes(notice) == ["refused: has a port outside 1..65535"] and notice.gave_up_at is not None


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The system resolver, answering ``hooks.example`` with the addresses listed (each lookup
    takes the next answer) and recording each lookup of it."""
    answers: dict[str, list[str]] = {"hooks.example": []}
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.example":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        address = answers[host].pop(0)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    answers["lookups"] = lookups
    return answers


def test_a_name_is_resolved_once_and_the_post_goes_to_the_address_checked(
        receiver: Receiver, resolver: dict[str, list[str]], settings: Any) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CALLBACK_ALLOW": ["127.0.0.0/8"]}
    port = receiver.url.split(":")[2].split("/")[0]
    resolver["hooks.example"] = ["127.0.0.1", "10.9.9.9"]  # a second lookup would be rebound elsewhere
    notice = notice_of(f"http://hooks.example:{port}/proof-done")
    assert deliver_due() == 1
    assert outcomes(notice) == ["delivered: HTTP 200"] and resolver["lookups"] == ["hooks.example"]
    ((headers, _),) = receiver.received
    assert headers["Host"] == f"hooks.example:{port}"  # the URL's host, at the address pinned


def test_a_name_that_resolves_to_an_internal_address_is_refused(receiver: Receiver,
                                                                resolver: dict[str, list[str]]) -> None:
    port = receiver.url.split(":")[2].split("/")[0]
    resolver["hooks.example"] = ["10.9.9.9"]
    notice = notice_of(f"http://hooks.example:{port}/proof-done")
    assert deliver_due() == 1
    assert outcomes(notice) == ["refused: hooks.example resolves to an address that is not public"]
    assert receiver.received == []


def test_a_redirect_is_an_answer_never_followed(receiver: Receiver, elsewhere: Receiver) -> None:
    receiver.answers, receiver.location = [302], elsewhere.url
    notice = notice_of(receiver.url)
    assert deliver_due() == 1
    assert outcomes(notice) == ["refused: HTTP 302 (redirects are not followed)"]
    assert len(receiver.received) == 1 and elsewhere.received == [] and notice.gave_up_at is None


def test_no_outcome_tells_a_closed_port_from_one_that_never_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.pipeline import notify

    monkeypatch.setattr(notify, "TIMEOUT_SECONDS", 0.3)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    silent = socket.socket()  # listens, accepts into its backlog, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    try:
        api, _ = client_with_callback(f"http://127.0.0.1:{closed_port}/done")
        cancel_job(submitted(api, "to-closed"))
        cancel_job(submitted(api, "to-silent", callback_url=f"http://127.0.0.1:{silent.getsockname()[1]}/done"))
        assert deliver_due() == 2
    finally:
        silent.close()
    said = {c.job.job_id: c.attempts[0]["outcome"] for c in Callback.objects.select_related("job")}
    assert said == {"to-closed": "failed: no answer", "to-silent": "failed: no answer"}
