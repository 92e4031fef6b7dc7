"""GET /api/v1/events: an API client follows its own jobs as they move, without polling, and
misses nothing when its connection drops."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import ApplicationCommunicator
from django.utils import timezone

from engine.api.events import JobEventsConsumer
from engine.ledger.jobs import cancel_job, submit_job
from engine.ledger.tokens import issue_token
from engine.ledger.writer import StatusWriter
from engine.models import EngineHost, ProofJob
from engine.states import PartitionState
from engine.status.job_events import REPLAY_RETENTION_S, EventId
from tests.engine.conftest import walk

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState


def scope(token: str | None, last_event_id: str | None = None) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    if last_event_id is not None:
        headers.append((b"last-event-id", last_event_id.encode()))
    return {"type": "http", "method": "GET", "path": "/api/v1/events", "headers": headers, "query_string": b""}


async def frames(communicator: ApplicationCommunicator, n: int) -> list[dict[str, Any]]:
    """The job events of the stream's next bodies until there are ``n`` or more (one body may
    carry several: a read's events are sent together), each its id and data (comments skipped)."""
    found: list[dict[str, Any]] = []
    buffer = ""
    while len(found) < n:
        message = await communicator.receive_output(timeout=5)
        buffer += message.get("body", b"").decode()
        *complete, buffer = buffer.split("\n\n")
        for frame in complete:
            fields = dict(line.split(": ", 1) for line in frame.splitlines() if not line.startswith(":") and ": " in line)
            if fields.get("event") == "job":
                found.append({"id": fields["id"], **json.loads(fields["data"])})
    return found


def without_ids(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in event.items() if k != "id"} for event in found]


async def hint(job_id: str) -> None:
    await get_channel_layer().group_send("provingsite.status", {"type": "status.changed", "job": job_id})


async def opened(raw: str, last_event_id: str | None = None) -> ApplicationCommunicator:
    communicator = ApplicationCommunicator(JobEventsConsumer.as_asgi(), scope(raw, last_event_id))
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=5)
    assert start["status"] == 200 and (b"content-type", b"text/event-stream; charset=utf-8") in start["headers"]
    return communicator


async def closed(communicator: ApplicationCommunicator) -> None:
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(timeout=2)


def test_a_client_sees_its_active_jobs_then_each_change_of_its_own_jobs_only() -> None:
    mine, raw = issue_token("follower")
    other, _ = issue_token("someone-else")
    submit_job(kind="porep-c2", job_id="mine-1", inputs={}, num_partitions=2, client=mine)
    submit_job(kind="porep-c2", job_id="theirs-1", inputs={}, num_partitions=1, client=other)

    async def scenario() -> None:
        await get_channel_layer().flush()
        communicator = await opened(raw)
        assert without_ids(await frames(communicator, 1)) == [
            {"job_id": "mine-1", "state": "queued", "partitions_done": 0, "num_partitions": 2}]
        for job_id in ("theirs-1", "mine-1"):  # the other client's change is not this one's to see
            await database_sync_to_async(cancel_job)(await database_sync_to_async(ProofJob.objects.get)(job_id=job_id))
            await hint(job_id)
        assert without_ids(await frames(communicator, 1)) == [
            {"job_id": "mine-1", "state": "cancelled", "partitions_done": 0, "num_partitions": 2}]
        await closed(communicator)

    async_to_sync(scenario)()


def test_the_stream_opens_at_once_even_with_no_job_to_tell_of() -> None:
    # Its headers went out with its first body, and with no active job that was the first ping
    # 15 s later: a client saw nothing at all, headers included, for 15 s.
    _, raw = issue_token("idle-client")

    async def scenario() -> None:
        communicator = await opened(raw)
        first = await communicator.receive_output(timeout=1)
        assert first["body"].startswith(b": open\n") and b"retry: " in first["body"] and first["more_body"]
        await closed(communicator)

    async_to_sync(scenario)()


def test_a_quiet_stream_says_it_is_alive_every_few_seconds() -> None:
    _, raw = issue_token("quiet-client")
    assert JobEventsConsumer.ping_seconds <= 5

    async def scenario() -> None:
        communicator = await opened(raw)
        await communicator.receive_output(timeout=1)  # ": open"
        ping = await communicator.receive_output(timeout=JobEventsConsumer.ping_seconds + 2)
        assert ping["body"] == b": ping\n\n"
        await closed(communicator)

    async_to_sync(scenario)()


def test_event_ids_are_unique_and_rise_along_a_stream() -> None:
    # Each id was the version its read saw: every job of one read carried the same id.
    mine, raw = issue_token("many-jobs")
    for n in range(3):
        submit_job(kind="porep-c2", job_id=f"job-{n}", inputs={}, num_partitions=1, client=mine)

    async def scenario() -> None:
        communicator = await opened(raw)
        first = await frames(communicator, 3)
        await database_sync_to_async(cancel_job)(await database_sync_to_async(ProofJob.objects.get)(job_id="job-1"))
        await hint("job-1")
        later = await frames(communicator, 1)
        ids = [EventId.parse(event["id"]) for event in first + later]
        assert all(ids) and len({str(i) for i in ids}) == 4
        order = [(i.version, i.place) for i in ids if i is not None]
        assert order == sorted(order) and len(set(order)) == 4
        await closed(communicator)

    async_to_sync(scenario)()


def test_a_client_whose_connection_drops_mid_job_is_sent_its_end_when_it_reconnects() -> None:
    mine, raw = issue_token("reconnecting")
    submit_job(kind="porep-c2", job_id="long-job", inputs={}, num_partitions=2, client=mine)
    submit_job(kind="porep-c2", job_id="untouched", inputs={}, num_partitions=1, client=mine)
    ProofJob.objects.update(submitted_at=timezone.now() - timedelta(minutes=1))  # both well before the stream
    writer = StatusWriter(EngineHost.objects.create(name="host-a"))

    async def scenario() -> None:
        communicator = await opened(raw)
        assert {e["job_id"] for e in await frames(communicator, 2)} == {"long-job", "untouched"}
        claims = await database_sync_to_async(writer.claim)(2)  # the long job's two partitions
        await database_sync_to_async(walk)(writer, claims[0], P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING, P.DONE)
        await hint("long-job")
        (halfway,) = await frames(communicator, 1)
        assert (halfway["state"], halfway["partitions_done"]) == ("running", 1)
        await closed(communicator)  # the connection drops mid-job

        # Meanwhile the job ends.
        await database_sync_to_async(walk)(writer, claims[1], P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING, P.DONE)
        assert (await database_sync_to_async(ProofJob.objects.get)(job_id="long-job")).state == "done"

        again = await opened(raw, last_event_id=halfway["id"])
        await again.receive_output(timeout=1)  # ": open"
        (end,) = await frames(again, 1)  # what it missed, and only that: "untouched" did not change
        assert without_ids([end]) == [{"job_id": "long-job", "state": "done", "partitions_done": 2,
                                       "num_partitions": 2}]
        before, after = EventId.parse(halfway["id"]), EventId.parse(end["id"])
        assert before is not None and after is not None and after.version > before.version
        await closed(again)

    async_to_sync(scenario)()


def test_a_replay_covers_the_retention_and_no_further() -> None:
    mine, raw = issue_token("long-gone")
    submit_job(kind="porep-c2", job_id="ended-long-ago", inputs={}, num_partitions=1, client=mine)
    submit_job(kind="porep-c2", job_id="ended-lately", inputs={}, num_partitions=1, client=mine)
    ProofJob.objects.update(submitted_at=timezone.now() - timedelta(hours=2))

    async def scenario() -> None:
        communicator = await opened(raw)
        events = await frames(communicator, 2)
        await closed(communicator)
        for job_id in ("ended-long-ago", "ended-lately"):
            await database_sync_to_async(cancel_job)(await database_sync_to_async(ProofJob.objects.get)(job_id=job_id))
        old = timezone.now() - timedelta(seconds=REPLAY_RETENTION_S + 60)
        await database_sync_to_async(ProofJob.objects.filter(job_id="ended-long-ago").update)(finished_at=old)
        again = await opened(raw, last_event_id=max(events, key=lambda e: e["id"])["id"])
        await again.receive_output(timeout=1)
        # the replay is one body: the job that ended lately, not the one that ended before the retention
        assert [e["job_id"] for e in await frames(again, 1)] == ["ended-lately"]
        await closed(again)

    async_to_sync(scenario)()


def test_an_id_the_stream_did_not_send_is_taken_as_a_first_connect() -> None:
    mine, raw = issue_token("made-up-id")
    submit_job(kind="porep-c2", job_id="active", inputs={}, num_partitions=1, client=mine)

    async def scenario() -> None:
        communicator = await opened(raw, last_event_id="not-one-of-ours")
        assert [e["job_id"] for e in await frames(communicator, 1)] == ["active"]
        await closed(communicator)

    async_to_sync(scenario)()


def test_a_stream_without_a_live_token_is_refused() -> None:
    async def scenario() -> None:
        communicator = ApplicationCommunicator(JobEventsConsumer.as_asgi(), scope("ps_not-a-token"))
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(timeout=5)
        assert start["status"] == 401
        await communicator.wait(timeout=2)

    async_to_sync(scenario)()
