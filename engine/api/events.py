"""GET /api/v1/events: a token's own jobs as they move, so an API client need not poll.

Server-sent events with the bearer token of the REST API. The stream opens at once: its
headers and a comment (``: open``, with ``retry:``), then a ``job`` event per job the token
has queued or running, then one each time one of its jobs changes state or finishes a
partition (``data``: job_id, state, partitions_done, num_partitions), and a comment every
``ping_seconds`` so a quiet stream is seen to be alive (and proxies keep it). An operator
token sees every job. The engine's hints only say which job to look at; what is sent is read
from the records (engine.status.job_events), a few times a second at most.

Each event's ``id`` names the snapshot it was read in and rises strictly along a stream. A
client that reconnects with ``Last-Event-ID`` is sent, first, every job of its own that
changed since that id, at its state now (within engine.status.job_events' retention: the
last hour's changes, a thousand jobs at most), so it never misses the end of a job.
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
from engine.api.job_fields import limited_to
from engine.headers import bearer
from engine.ledger.hints import GROUP
from engine.models import ApiToken
from engine.status.job_events import EventId, JobEvents, job_events

log = logging.getLogger("engine.api")

RETRY_MS = 2000


def _header(scope: dict[str, Any], name: bytes) -> str:
    return dict(scope.get("headers") or []).get(name, b"").decode("latin-1")


def _token(scope: dict[str, Any]) -> ApiToken | None:
    raw = bearer(_header(scope, b"authorization"))
    return token_for(raw) if raw else None


class JobEventsConsumer(AsyncHttpConsumer):
    flush_seconds: float = 0.1
    ping_seconds: float = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client: ApiToken | None = None
        self.hinted: set[str] = set()
        self.wake = asyncio.Event()
        self.sent: dict[str, tuple[str, int]] = {}  # job id → (state, partitions done) last sent
        self.last_id: EventId | None = None
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
        # A body at once: a server sends the headers with the first body, and a client must not
        # wait for a job to change (or the first ping) to know the stream is open.
        await self.send_body(f": open\nretry: {RETRY_MS}\n\n".encode(), more_body=True)
        self.streaming = True
        # Joined before the first read, so a change committed meanwhile is not missed.
        await self.channel_layer.group_add(GROUP, self.channel_name)
        self.last_id = EventId.parse(_header(self.scope, b"last-event-id"))
        owner = limited_to(self.client)
        if self.last_id is not None:  # a reconnect: what it missed, then on as usual
            await self._send(await database_sync_to_async(job_events)(owner, since=self.last_id))
        else:
            await self._send(await database_sync_to_async(job_events)(owner))
        self.tasks = [asyncio.create_task(self._flush_forever()), asyncio.create_task(self._ping_forever())]

    async def status_changed(self, message: dict[str, Any]) -> None:
        if message.get("job"):
            self.hinted.add(str(message["job"]))
            self.wake.set()

    async def _flush_forever(self) -> None:
        assert self.client is not None
        owner = limited_to(self.client)
        while True:
            await self.wake.wait()
            self.wake.clear()
            hinted, self.hinted = self.hinted, set()
            await self._send(await database_sync_to_async(job_events)(owner, job_ids=hinted))
            await asyncio.sleep(self.flush_seconds)

    async def _send(self, read: JobEvents) -> None:
        frames = []
        for event in read.events:
            now = (event.state, event.partitions_done)
            if self.sent.get(event.job_id) == now:
                continue
            self.sent[event.job_id] = now
            self.last_id = read.first_id().after(self.last_id)
            frames.append(f"event: job\nid: {self.last_id}\ndata: {json.dumps(event.data())}\n\n")
        if frames:
            await self.send_body("".join(frames).encode(), more_body=True)

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
