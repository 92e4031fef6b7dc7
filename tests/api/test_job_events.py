"""GET /api/v1/events: an API client follows its own jobs as they move, without polling."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import ApplicationCommunicator

from engine.api.events import JobEventsConsumer
from engine.ledger.jobs import cancel_job, submit_job
from engine.ledger.tokens import issue_token
from engine.models import ProofJob

pytestmark = pytest.mark.django_db(transaction=True)


def scope(token: str | None) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return {"type": "http", "method": "GET", "path": "/api/v1/events", "headers": headers, "query_string": b""}


async def events(communicator: ApplicationCommunicator, n: int) -> list[dict[str, Any]]:
    """The next ``n`` job events of the stream (pings skipped)."""
    found: list[dict[str, Any]] = []
    while len(found) < n:
        message = await communicator.receive_output(timeout=5)
        body = message.get("body", b"").decode()
        found += [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    return found


def test_a_client_sees_its_active_jobs_then_each_change_of_its_own_jobs_only() -> None:
    mine, raw = issue_token("follower")
    other, _ = issue_token("someone-else")
    submit_job(kind="porep-c2", job_id="mine-1", inputs={}, num_partitions=2, client=mine)
    submit_job(kind="porep-c2", job_id="theirs-1", inputs={}, num_partitions=1, client=other)

    async def scenario() -> None:
        await get_channel_layer().flush()
        communicator = ApplicationCommunicator(JobEventsConsumer.as_asgi(), scope(raw))
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(timeout=5)
        assert start["status"] == 200 and (b"content-type", b"text/event-stream; charset=utf-8") in start["headers"]
        assert await events(communicator, 1) == [
            {"job_id": "mine-1", "state": "queued", "partitions_done": 0, "num_partitions": 2}]
        for job_id in ("theirs-1", "mine-1"):  # the other client's change is not this one's to see
            await database_sync_to_async(cancel_job)(await database_sync_to_async(ProofJob.objects.get)(job_id=job_id))
            await get_channel_layer().group_send("provingsite.status", {"type": "status.changed", "job": job_id})
        assert await events(communicator, 1) == [
            {"job_id": "mine-1", "state": "cancelled", "partitions_done": 0, "num_partitions": 2}]
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=2)

    async_to_sync(scenario)()


def test_a_stream_without_a_live_token_is_refused() -> None:
    async def scenario() -> None:
        communicator = ApplicationCommunicator(JobEventsConsumer.as_asgi(), scope("ps_not-a-token"))
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(timeout=5)
        assert start["status"] == 401
        await communicator.wait(timeout=2)

    async_to_sync(scenario)()
