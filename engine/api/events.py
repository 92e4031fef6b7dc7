"""GET /api/v1/events: a token's own jobs as they move, so an API client need not poll.

Server-sent events with the bearer token of the REST API: first one ``job`` event per job the
token has queued or running, then one each time one of its jobs changes state or finishes a
partition (``data``: job_id, state, partitions_done, num_partitions; ``id``: the status
version the change was read at). An operator token sees every job. The engine's hints only
say which job to look at; what is sent is read from the records, a few times a second at most.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer

from engine.api.auth import token_for
from engine.api.jobs import visible_jobs_for
from engine.headers import bearer
from engine.ledger.hints import GROUP
from engine.models import ApiToken
from engine.states import JOB_ACTIVE, PartitionState
from engine.status.read import one_snapshot
from engine.status.records import clocks

log = logging.getLogger("engine.api")


def _token(scope: dict[str, Any]) -> ApiToken | None:
    headers = dict(scope.get("headers") or [])
    raw = bearer(headers.get(b"authorization", b"").decode("latin-1"))
    return token_for(raw) if raw else None


def _jobs(client: ApiToken, job_ids: set[str] | None) -> list[dict[str, Any]]:
    """The token's jobs named (or, for None, its active ones) as the events carry them."""
    from django.db.models import Count, Q

    jobs = visible_jobs_for(client)
    jobs = jobs.filter(state__in=JOB_ACTIVE) if job_ids is None else jobs.filter(job_id__in=job_ids)
    with one_snapshot():
        version = clocks().version
        rows = list(jobs.annotate(done=Count("partitions", filter=Q(partitions__state=PartitionState.DONE)))
                    .values_list("job_id", "state", "done", "num_partitions"))
    return [{"job_id": j, "state": s, "partitions_done": d, "num_partitions": n, "version": version}
            for j, s, d, n in rows]


class JobEventsConsumer(AsyncHttpConsumer):
    flush_seconds: float = 0.1
    ping_seconds: float = 15.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client: ApiToken | None = None
        self.hinted: set[str] = set()
        self.wake = asyncio.Event()
        self.sent: dict[str, tuple[str, int]] = {}  # job id → (state, partitions done) last sent
        self.tasks: list[asyncio.Task[None]] = []
        self.streaming = False

    async def http_request(self, message: dict[str, Any]) -> None:
        # As the console's stream: handle() starts the stream and returns; it lives until the client leaves.
        if message.get("more_body"):
            return
        await self.handle(b"")
        if not self.streaming:
            raise StopConsumer()

    async def handle(self, body: bytes) -> None:
        self.client = await database_sync_to_async(_token)(self.scope)
        if self.client is None:
            await self.send_response(401, json.dumps({"error": "unauthorized", "field": "Authorization",
                                                      "detail": "send a live API token as a bearer token"}).encode(),
                                     headers=[(b"content-type", b"application/json"),
                                              (b"www-authenticate", b'Bearer realm="provingsite"')])
            return
        await self.send_headers(headers=[(b"content-type", b"text/event-stream; charset=utf-8"),
                                         (b"cache-control", b"no-cache, no-transform"), (b"x-accel-buffering", b"no")])
        self.streaming = True
        # Joined before the first read, so a change committed meanwhile is not missed.
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self._send(await database_sync_to_async(_jobs)(self.client, None))
        self.tasks = [asyncio.create_task(self._flush_forever()), asyncio.create_task(self._ping_forever())]

    async def status_changed(self, message: dict[str, Any]) -> None:
        if message.get("job"):
            self.hinted.add(str(message["job"]))
            self.wake.set()

    async def _flush_forever(self) -> None:
        assert self.client is not None
        while True:
            await self.wake.wait()
            self.wake.clear()
            hinted, self.hinted = self.hinted, set()
            await self._send(await database_sync_to_async(_jobs)(self.client, hinted))
            await asyncio.sleep(self.flush_seconds)

    async def _send(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            now = (row["state"], row["partitions_done"])
            if self.sent.get(row["job_id"]) == now:
                continue
            self.sent[row["job_id"]] = now
            frame = f"event: job\nid: {row.pop('version')}\ndata: {json.dumps(row)}\n\n"
            await self.send_body(frame.encode(), more_body=True)

    async def _ping_forever(self) -> None:
        while True:
            await asyncio.sleep(self.ping_seconds)
            await self.send_body(b": ping\n\n", more_body=True)

    async def disconnect(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.tasks = []
        if self.streaming:
            self.streaming = False
            await self.channel_layer.group_discard(GROUP, self.channel_name)
