"""Admission control: a bounded number of HTTP requests in flight, a short queue, then an
immediate 503 with Retry-After; the SSE stream is never counted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from provingsite.admission import Admission, Limits, admitted


class HeldApp:
    """An ASGI app whose requests stay in flight until released, like a slow view."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.started += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def request(app: Any, path: str = "/api/v1/jobs", kind: str = "http",
                  method: str = "GET") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": kind, "path": path, "method": method}, receive, send)
    return sent


def status(sent: list[dict[str, Any]]) -> int:
    return int(sent[0]["status"])


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let started tasks reach their first await


def test_requests_past_the_cap_and_the_queue_get_503_with_retry_after_at_once() -> None:
    async def scenario() -> None:
        inner = HeldApp()
        app = Admission(inner, Limits(max_active=2, max_waiting=1, wait_seconds=30))
        held = [asyncio.create_task(request(app)) for _ in range(3)]  # two in flight, one queued
        await settle()
        refused = await asyncio.wait_for(request(app), 1)  # answered without waiting for a place
        assert status(refused) == 503
        headers = dict(refused[0]["headers"])
        assert headers[b"retry-after"] == b"1"
        assert json.loads(refused[1]["body"])["error"] == "overloaded"
        assert inner.started == 2
        inner.release.set()
        assert [status(s) for s in await asyncio.gather(*held)] == [200, 200, 200]

    asyncio.run(scenario())


def test_a_queued_request_is_served_when_a_place_frees() -> None:
    async def scenario() -> None:
        inner = HeldApp()
        app = Admission(inner, Limits(max_active=1, max_waiting=1, wait_seconds=30))
        first, queued = asyncio.create_task(request(app)), asyncio.create_task(request(app))
        await settle()
        assert (inner.started, app.waiting) == (1, 1)
        inner.release.set()
        assert [status(await first), status(await queued)] == [200, 200]
        assert (app.active, app.waiting, app.refused) == (0, 0, 0)

    asyncio.run(scenario())


def test_a_queued_request_that_waits_past_its_time_gets_503() -> None:
    async def scenario() -> None:
        inner = HeldApp()
        app = Admission(inner, Limits(max_active=1, max_waiting=4, wait_seconds=0.01))
        first = asyncio.create_task(request(app))
        await settle()
        assert status(await asyncio.wait_for(request(app), 1)) == 503
        inner.release.set()
        assert status(await first) == 200

    asyncio.run(scenario())


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/events/"), ("POST", "/api/v1/jobs/custom"), ("POST", "/api/v1/circuits"),
    ("POST", "/api/v1/circuits/" + "ab" * 32 + "/jobs"),
    ("GET", "/static/vendor/htmx-2.0.11.min.js"), ("GET", "/favicon.ico")])
def test_the_event_stream_uploads_and_a_pages_static_files_are_not_counted(method: str, path: str) -> None:
    async def scenario() -> None:
        inner = HeldApp()
        app = Admission(inner, Limits(max_active=1, max_waiting=0, wait_seconds=0))
        streams = [asyncio.create_task(request(app, path, method=method)) for _ in range(5)]
        await settle()
        assert inner.started == 5 and app.active == 0
        inner.release.set()
        await asyncio.gather(*streams)

    asyncio.run(scenario())


def test_other_protocols_pass_straight_through() -> None:
    async def scenario() -> None:
        seen: list[str] = []

        async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
            seen.append(scope["type"])

        app = Admission(inner, Limits(max_active=1, max_waiting=0, wait_seconds=0))
        await request(app, kind="lifespan")
        assert seen == ["lifespan"] and app.active == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("shedding", [True, False])
def test_the_application_is_behind_admission_only_with_shedding_on(settings, shedding: bool) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "LOAD_SHEDDING": shedding}

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        return None

    assert isinstance(admitted(inner), Admission) is shedding
