"""/events/: the console's server-sent event stream.

On connect: every fragment as an out-of-band swap. Then, for each "status.changed" hint from
the engine's writer, the fragments that hint can affect are marked dirty; a flusher re-reads
them from the records at most a few times per second and sends only those whose content
changed. Hints are never trusted for content: they only say where to look.

All connections in a process share one memo of renders (SharedRenders), so fifty open
consoles cost one database read and one template render per change, not fifty.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.utils import timezone

from engine.console import fragments
from engine.console.views import can_view

try:
    from engine.record import GROUP
except ImportError:  # the status writer is being written beside us; its group name is agreed
    GROUP = "provingsite.status"

log = logging.getLogger("engine.console")


@dataclass(frozen=True)
class Entry:
    version: int
    consistent: bool
    at: float  # time.monotonic() of the render
    html: str
    digest: str


class SharedRenders:
    """The newest render of each fragment in this process, re-rendered only when a caller
    needs a newer version than the one held (or a timed fragment has aged)."""

    # An inexact render (the farm moved while it was read) is reused only briefly.
    INEXACT_REUSE_S = 0.1

    def __init__(self) -> None:
        self.latest: dict[str, Entry] = {}
        self.renders = 0
        self.render_seconds = 0.0
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def clear(self) -> None:
        self.latest.clear()
        self.renders = 0
        self.render_seconds = 0.0

    def _lock_for_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            # A new event loop is a new server (tests start one per test): start afresh.
            self._loop, self._lock = loop, asyncio.Lock()
            self.latest.clear()
        return self._lock

    def _usable(self, name: str, min_version: int, max_age: float, now: float) -> bool:
        entry = self.latest.get(name)
        if entry is None or entry.version < min_version:
            return False
        if not entry.consistent and now - entry.at > self.INEXACT_REUSE_S:
            return False
        return not (name in fragments.TIMED and now - entry.at > max_age)

    async def get(self, names: frozenset[str] | set[str], min_version: int, max_age: float) -> dict[str, Entry]:
        async with self._lock_for_loop():
            now = time.monotonic()
            missing = {n for n in names if not self._usable(n, min_version, max_age, now)}
            if missing:
                began = time.monotonic()
                rendered = await database_sync_to_async(fragments.render)(missing)
                self.renders += 1
                self.render_seconds += time.monotonic() - began
                at = time.monotonic()
                for name in missing:
                    self.latest[name] = Entry(rendered.version, rendered.consistent, at,
                                              rendered.html(name), rendered.digest(name))
            return {n: self.latest[n] for n in names}


SHARED = SharedRenders()


class Hub:
    """The process's one member of the status group, fanning each hint out to the open
    streams by a plain call. Fifty consoles as fifty group members would cost fifty channel
    messages (and fifty dispatches) per transition; this costs one."""

    def __init__(self) -> None:
        self.streams: set[EventStreamConsumer] = set()
        self.channel: str | None = None
        self.task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def join(self, stream: EventStreamConsumer) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop is a new server (tests)
            self._loop, self.streams, self.channel, self.task = loop, set(), None, None
        self.streams.add(stream)
        if self.task is None:
            layer = stream.channel_layer
            self.channel = await layer.new_channel("console-hub.")
            await layer.group_add(GROUP, self.channel)
            self.task = asyncio.create_task(self._pump(layer, self.channel))

    async def leave(self, stream: EventStreamConsumer) -> None:
        self.streams.discard(stream)
        if self.streams or self.task is None or self._loop is not asyncio.get_running_loop():
            return
        task, channel, self.task, self.channel = self.task, self.channel, None, None
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
        await stream.channel_layer.group_discard(GROUP, channel)

    async def _pump(self, layer: Any, channel: str) -> None:
        while True:
            message = await layer.receive(channel)
            if message.get("type") == "status.changed":
                for stream in list(self.streams):
                    stream.hint(message)


HUB = Hub()


def sse_frame(html: str, *, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    lines: list[str] = []
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.extend(f"data: {line}" for line in html.splitlines() or [""])
    return ("\n".join(lines) + "\n\n").encode()


def clock_span(now: datetime, version: int) -> str:
    return (f'<span id="server-clock" hx-swap-oob="true" data-now="{fragments.epoch_ms(now)}" '
            f'data-version="{version}"></span>')


def _viewer(user: Any) -> bool:
    return user is not None and can_view(user)


class EventStreamConsumer(AsyncHttpConsumer):
    # Class attributes so tests (and the bench) can shorten them.
    ping_seconds: float = 15.0
    # At most about six flushes a second per connection: a burst costs few frames, and the
    # longest a change waits is one interval plus one render (p99 target 250 ms).
    flush_seconds: float = 0.15
    refresh_seconds: float = 5.0  # timed fragments (stale flags, task stream) at least this often
    retry_ms: int = 2000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.streaming = False
        self.joined = False
        self.tasks: list[asyncio.Task[None]] = []
        self.sent: dict[str, str] = {}
        self.dirty: set[str] = set()
        self.min_version = 0
        self.wake = asyncio.Event()
        self.last_flush = 0.0
        self.last_timed = 0.0
        self.flushes = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Also when the server cancels us (shutdown) rather than the client leaving.
            await self.disconnect()

    async def http_request(self, message: dict[str, Any]) -> None:
        # The base class ends the response as soon as handle() returns. A stream must stay
        # open, and the dispatch loop must stay free to deliver the group's hints, so handle()
        # returns after starting the stream and the consumer lives on until http.disconnect.
        if "body" in message:
            self.body.append(message["body"])
        if message.get("more_body"):
            return
        try:
            await self.handle(b"".join(self.body))
        except BaseException:
            await self.disconnect()
            raise
        if not self.streaming:
            await self.disconnect()
            raise StopConsumer()

    async def handle(self, body: bytes) -> None:
        if not await database_sync_to_async(_viewer)(self.scope.get("user")):
            await self.send_response(403, b"the console stream needs a staff or operator login\n",
                                     headers=[(b"content-type", b"text/plain; charset=utf-8")])
            return
        await self.send_headers(headers=[
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"x-accel-buffering", b"no"),  # no proxy buffering of the stream
        ])
        self.streaming = True
        # Join before the snapshot, so a change committed while it renders is not missed.
        await HUB.join(self)
        self.joined = True
        version = await database_sync_to_async(fragments.current_version)()
        await self.flush(fragments.ALL, version, snapshot=True)
        self.tasks = [asyncio.create_task(self.flusher()), asyncio.create_task(self.pinger())]

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The base dispatch closes stale DB connections through a thread hop before every
        # handler. A hint touches no database, and fifty consoles at sixty hints a second
        # would queue thousands of those hops a second in front of the renders.
        if message.get("type") == "status.changed":
            await self.status_changed(message)
            return
        await super().dispatch(message)

    async def status_changed(self, message: dict[str, Any]) -> None:
        """A hint sent to this stream's own channel (the hub delivers the group's)."""
        self.hint(message)

    def hint(self, message: dict[str, Any]) -> None:
        self.dirty |= fragments.affected(message)
        try:
            self.min_version = max(self.min_version, int(message.get("version") or 0))
        except (TypeError, ValueError):
            pass
        self.wake.set()

    async def flusher(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                wait = max(self.refresh_seconds - (loop.time() - self.last_timed), 0.0)
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=wait)
                except TimeoutError:
                    pass
                if loop.time() - self.last_timed >= self.refresh_seconds:
                    self.dirty |= fragments.TIMED
                if not self.dirty:
                    continue
                # Coalesce a burst: changes within one interval go out together. Flushes fall
                # on a process-wide grid of intervals, so all open consoles flush together and
                # share one render instead of each reading the records at its own moment.
                now = loop.time()
                tick = math.ceil(now / self.flush_seconds) * self.flush_seconds
                if tick - self.last_flush < self.flush_seconds / 2:  # that tick was this interval's
                    tick += self.flush_seconds
                await asyncio.sleep(max(tick - now, 0.0))
                self.wake.clear()
                names, self.dirty = self.dirty, set()
                await self.flush(names, self.min_version)
        except asyncio.CancelledError:
            raise
        except Exception:  # a send after the client left; the disconnect handler cleans up
            log.debug("event stream flusher stopped", exc_info=True)

    async def flush(self, names: frozenset[str] | set[str], min_version: int, *, snapshot: bool = False) -> None:
        loop = asyncio.get_running_loop()
        # The interval runs from the start of a flush, so render time is not added to it.
        self.last_flush = loop.time()
        entries = await SHARED.get(names, min_version, self.refresh_seconds)
        if names & fragments.TIMED == fragments.TIMED:
            self.last_timed = loop.time()
        changed = [n for n in sorted(names) if self.sent.get(n) != entries[n].digest]
        inexact = {n for n, e in entries.items() if not e.consistent}
        if inexact:  # read again soon, when the farm has settled
            self.dirty |= inexact
            self.wake.set()
        if not changed and not snapshot:
            return
        version = max([e.version for e in entries.values()] + [min_version])
        html = "\n".join([clock_span(timezone.now(), version)] + [entries[n].html for n in changed])
        frame = sse_frame(html, event_id=str(version), retry_ms=self.retry_ms if snapshot else None)
        await self.send_body(frame, more_body=True)
        self.flushes += 1
        for name in changed:
            self.sent[name] = entries[name].digest

    async def pinger(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.ping_seconds)
                await self.send_body(b": ping\n\n", more_body=True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("event stream pinger stopped", exc_info=True)

    async def disconnect(self) -> None:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self.joined:
            self.joined = False
            await HUB.leave(self)
