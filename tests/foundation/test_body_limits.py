"""Request bodies are bounded at header time by the web server itself (provingsite/server.py).

A real server in its own process on a free port; bodies are generated and streamed from one
reused buffer, and the server's memory is read from /proc before and after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.foundation.webserver import (
    MiB,
    WebServer,
    migrated_server,
    multipart,
    read_answer,
    request,
    send_head,
    server_env,
    stream_until_answered,
    zeros,
)

UPLOAD_LIMIT = 64 * MiB
HUGE = 300 * MiB
# The server may grow by this much while a body far larger goes by (it grows by more than
# the body when it buffers one).
MEMORY_SLACK_KIB = 48 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    data = tmp_path_factory.mktemp("bounded-web")
    yield from migrated_server(data, server_env(data, PROVINGSITE_UPLOAD_LIMIT=str(UPLOAD_LIMIT)))


@pytest.fixture(scope="module")
def token(server: WebServer) -> str:
    raw = server.manage("createtoken", "body-limits").strip()
    # Warm the server up (URLconf, the API, the multipart parser) so memory is measured
    # against a server that has served each kind of request once.
    bearer = {"Authorization": f"Bearer {raw}"}
    request(server, "GET", "/api/v1/jobs", bearer)
    headers, pieces = multipart(256 * 1024)
    request(server, "POST", "/api/v1/jobs/custom", bearer | headers, b"".join(pieces))
    return raw


class Poller:
    """GET /api/v1/jobs over and over on its own connections; the slowest answer seen."""

    def __init__(self, server: WebServer, token: str) -> None:
        self.server, self.token = server, token
        self.slowest = 0.0
        self.answers = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            answer = request(self.server, "GET", "/api/v1/jobs", {"Authorization": f"Bearer {self.token}"})
            assert answer.status == 200
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.answers += 1
            self.stop.wait(0.05)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def big_upload(server: WebServer, path: str, headers: dict[str, str], pieces: Iterator[bytes],
               chunked: bool = False) -> tuple[int, int]:
    """Stream a body until the server answers: (status, bytes sent)."""
    with server.connect(timeout=120) as sock:
        framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(HUGE)}
        send_head(sock, "POST", path, headers | framing)
        sent = stream_until_answered(sock, pieces, chunked=chunked)
        return read_answer(sock).status, sent


@pytest.mark.slow
def test_an_unauthenticated_300_mib_multipart_post_is_refused_without_the_server_growing(
        server: WebServer, token: str) -> None:
    server.reset_peak()
    rss, peak = server.memory_kib("VmRSS"), server.memory_kib("VmHWM")
    headers, pieces = multipart(HUGE)
    with Poller(server, token) as poller:
        status, sent = big_upload(server, "/status", headers, pieces)
    assert status in (401, 403, 413)
    assert sent < HUGE
    assert server.memory_kib("VmRSS") - rss < MEMORY_SLACK_KIB
    assert server.memory_kib("VmHWM") - peak < MEMORY_SLACK_KIB
    assert poller.answers > 0 and poller.slowest < 1.0


@pytest.mark.slow
def test_a_chunked_300_mib_upload_is_cut_off_at_the_upload_limit_while_other_requests_are_answered(
        server: WebServer, token: str) -> None:
    server.reset_peak()
    rss, peak = server.memory_kib("VmRSS"), server.memory_kib("VmHWM")
    headers, pieces = multipart(HUGE)
    with Poller(server, token) as poller:
        status, sent = big_upload(server, "/api/v1/jobs/custom", headers | {"Authorization": f"Bearer {token}"},
                                  pieces, chunked=True)
    assert status == 413
    assert UPLOAD_LIMIT <= sent < HUGE
    assert server.memory_kib("VmRSS") - rss < MEMORY_SLACK_KIB
    assert server.memory_kib("VmHWM") - peak < MEMORY_SLACK_KIB
    assert poller.answers > 0 and poller.slowest < 1.0


@pytest.mark.slow
def test_an_upload_under_the_limit_reaches_the_endpoint_without_being_held_in_memory(
        server: WebServer, token: str) -> None:
    size = UPLOAD_LIMIT - MiB
    server.reset_peak()
    peak = server.memory_kib("VmHWM")
    headers, pieces = multipart(size)
    with server.connect(timeout=120) as sock:
        send_head(sock, "POST", "/api/v1/jobs/custom",
                  headers | {"Authorization": f"Bearer {token}", "Content-Length": str(size)})
        assert stream_until_answered(sock, pieces) == size
        answer = read_answer(sock)
    # Parsed to the end: the view then misses the job_id this body leaves out.
    assert (answer.status, b'"field": "job_id"' in answer.body) == (400, True)
    assert server.memory_kib("VmHWM") - peak < MEMORY_SLACK_KIB


def test_a_declared_300_mib_body_is_answered_413_before_a_byte_of_it_is_sent(server: WebServer, token: str) -> None:
    with server.connect(timeout=5) as sock:
        started = time.monotonic()
        send_head(sock, "POST", "/api/v1/jobs/custom",
                  {"Authorization": f"Bearer {token}", "Content-Length": str(HUGE),
                   "Content-Type": "multipart/form-data; boundary=x"})
        answer = read_answer(sock)
    assert answer.status == 413
    assert time.monotonic() - started < 2.0


def test_a_body_sent_without_credentials_is_answered_401_before_it_is_read(server: WebServer) -> None:
    with server.connect(timeout=5) as sock:
        send_head(sock, "POST", "/api/v1/jobs", {"Content-Length": "1000", "Content-Type": "application/json"})
        answer = read_answer(sock)
    assert answer.status == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_body_with_a_made_up_token_is_answered_401_before_it_is_read(server: WebServer) -> None:
    with server.connect(timeout=5) as sock:
        send_head(sock, "POST", "/api/v1/jobs/custom", {"Authorization": "Bearer ps_made-up", "Content-Length": str(UPLOAD_LIMIT),
                                                        "Content-Type": "multipart/form-data; boundary=x"})
        assert read_answer(sock).status == 401


def test_a_live_token_is_invited_to_send_its_body_once_it_is_looked_up(server: WebServer, token: str) -> None:
    body = b'{"kind": 1}'
    with server.connect(timeout=5) as sock:
        send_head(sock, "POST", "/api/v1/jobs", {"Authorization": f"Bearer {token}", "Expect": "100-continue",
                                                 "Content-Type": "application/json", "Content-Length": str(len(body))})
        interim = b""
        while b"\r\n\r\n" not in interim:  # http.client would skip over it
            interim += sock.recv(1)
        assert interim.startswith(b"HTTP/1.1 100")
        sock.sendall(body)
        assert read_answer(sock).status == 400


def test_a_json_body_over_a_few_kib_is_refused_while_it_streams(server: WebServer, token: str) -> None:
    with server.connect(timeout=10) as sock:
        send_head(sock, "POST", "/api/v1/jobs", {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                                 "Transfer-Encoding": "chunked"})
        sent = stream_until_answered(sock, zeros(8 * MiB, block=4096), chunked=True)
        assert read_answer(sock).status == 413
    assert sent < 8 * MiB


def test_a_get_may_carry_no_body(server: WebServer, token: str) -> None:
    answer = request(server, "GET", "/api/v1/jobs", {"Authorization": f"Bearer {token}"}, body=b"{}")
    assert answer.status == 413


def test_a_small_json_body_still_reaches_the_api(server: WebServer, token: str) -> None:
    answer = request(server, "POST", "/api/v1/jobs",
                     {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}, body=b'{"kind": 1}')
    assert (answer.status, b'"field": "kind"' in answer.body) == (400, True)


def test_the_console_stream_still_opens(server: WebServer) -> None:
    session = server.python(
        "from django.contrib.auth import get_user_model\n"
        "from django.contrib.sessions.backends.db import SessionStore\n"
        "user = get_user_model().objects.create_user('stream-watcher', is_staff=True)\n"
        "store = SessionStore()\n"
        "store.update({'_auth_user_id': str(user.pk), '_auth_user_hash': user.get_session_auth_hash(),\n"
        "              '_auth_user_backend': 'django.contrib.auth.backends.ModelBackend'})\n"
        "store.create()\n"
        "print(store.session_key)")
    with server.connect(timeout=30) as sock:
        send_head(sock, "GET", "/events/", {"Cookie": f"sessionid={session}", "Accept": "text/event-stream"})
        first = b""
        while b"\r\n\r\n" not in first:
            first += sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    assert b"text/event-stream" in first


def test_a_static_path_climbing_out_is_a_404_with_no_traceback(server: WebServer) -> None:
    logged = len(server.log())
    answer = request(server, "GET", "/static/../provingsite/settings.py")
    assert answer.status == 404
    assert b"SECRET_KEY" not in answer.body
    assert "Traceback" not in server.log()[logged:]

