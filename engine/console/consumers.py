"""/events/: the console's server-sent event stream.

(Over 400 lines on purpose: the Hub, its fan-out and the consumer share one lifecycle —
join, pass, deliver, leave — and reading them apart would hide the ordering they depend on.)

On connect: every fragment as an out-of-band swap. Then, for each "status.changed" hint from
the engine's writer, the units that hint can affect are marked for reading; the process's one
flusher re-reads them from the records at most a few times per second and sends each open
stream only the units whose content differs from what that stream last received. Hints are
never trusted for content: they only say where to look.

One Hub per process does the work once for every open console: it is the process's single
member of the status group, it reads the records once per flush, and it builds each distinct
frame once; fifty consoles in step (nearly always all of them) get the same bytes. The flush
interval is a throttle: a change after a quiet spell goes out at once, a burst goes out in
frames one interval apart. Every few seconds a full pass re-reads everything, which moves the
sliding task stream and the stale flags and repairs anything a dropped hint left behind.

A job's page opens /events/?job=<job_id>: every pass then also reads that job's fragment
("job:<job_id>", engine.console.job_markup) in the same snapshot, and that stream is sent
that fragment's units only; the console's streams never see it. The jobs page opens
/events/?jobs=<its query> likewise: its fragment ("jobs:<query>", engine.console.jobs_table) is
the table of that query (filters, search, sort, page), read whole in every pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.layers import get_channel_layer
from django.utils import timezone

from engine.console import render as rendering
from engine.console.auth import may_view
from engine.console.fragments import ALL, Want, detail_name, jobs_name
from engine.console.jobs_table import JobsQuery
from engine.console.render import Rendered, clock_span
from engine.format import epoch_ms
from engine.ledger.clock import Reading
from engine.ledger.hints import GROUP

log = logging.getLogger("engine.console")


def sse_frame(html: str, *, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    lines: list[str] = []
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.extend(f"data: {line}" for line in html.splitlines() or [""])
    return ("\n".join(lines) + "\n\n").encode()


class Resync(Exception):
    """A stream lacks a unit's shape that this pass did not read in full."""


def changed_units(sent: dict[str, str], rendered: Rendered, roots: Iterable[str] | None = None) -> list[str]:
    """The units of a pass that a stream must be sent, parents before children. A unit whose
    digest differs is sent whole (its children inside it); otherwise its children are looked
    at one by one. Units the pass did not read are assumed unchanged: no hint pointed there.
    `roots` are the fragments the stream shows (default: every root of the pass)."""
    out: list[str] = []

    def visit(key: str) -> None:
        unit = rendered.units.get(key)
        if unit is None:
            return
        if sent.get(key) != unit.digest:
            if unit.html is None:
                raise Resync(key)
            out.append(key)
            return
        for child in unit.children:
            visit(child)

    for root in rendered.roots if roots is None else roots:
        visit(root)
    return out


class Delivery:
    """What sending a set of units does to a stream's record of what it holds."""

    def __init__(self, rendered: Rendered, keys: list[str]) -> None:
        self.updates: dict[str, str] = {}
        # A unit sent whole replaces its subtree in the browser: what the stream held under
        # it is forgotten (rows of ended jobs must not pile up in a long-open console).
        self.replaced = tuple(f"{key}/" for key in keys if rendered.units[key].children)
        for key in keys:
            self.updates[key] = rendered.units[key].digest
            for unit in rendered.descendants(key):
                self.updates[unit.key] = unit.digest

    def apply(self, sent: dict[str, str]) -> None:
        if self.replaced:
            for key in [k for k in sent if k.startswith(self.replaced)]:
                del sent[key]
        sent.update(self.updates)


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks and wait until each has stopped, whatever it raised."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass


class Hub:
    """The process's one member of the status group and its one flusher. Fifty consoles as
    fifty group members would cost fifty channel messages per transition, fifty flusher
    wake-ups and fifty frames built from the same render; this costs one of each."""

    def __init__(self) -> None:
        self.streams: set[EventStreamConsumer] = set()
        self.channel: str | None = None
        self.task: asyncio.Task[None] | None = None  # the group pump
        self.flusher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reset()

    def _reset(self) -> None:
        self.want = Want()
        self.covered = 0  # every change up to this farm version is in the frames sent
        self.read_at: Reading | None = None  # the clocks the last whole pass read (None: none yet)
        self.known: dict[str, str] = {}  # the digests of the roots of the last pass
        self.wake: asyncio.Event | None = None
        self.last_start = float("-inf")
        self.last_full = float("-inf")
        self.clear()

    def clear(self) -> None:
        """Zero the counters (tests and the bench start from zero)."""
        self.renders = 0
        self.render_seconds = 0.0  # reading and building, wall time in the database thread
        self.fan_out_seconds = 0.0  # diffing, framing and handing frames to the server
        self.frames_built = 0
        self.frames_sent = 0

    # -- membership ---------------------------------------------------------------------

    async def join(self, stream: EventStreamConsumer) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop is a new server (tests start one per test)
            self._loop, self.streams, self.channel, self.task, self.flusher = loop, set(), None, None, None
            self._reset()
        self.streams.add(stream)
        if self.wake is None:
            self.wake = asyncio.Event()
        if self.task is None:
            layer = get_channel_layer()
            self.channel = await layer.new_channel("console-hub.")
            await layer.group_add(GROUP, self.channel)
            self.task = asyncio.create_task(self._pump(layer, self.channel))
        if self.flusher is None:
            self.flusher = asyncio.create_task(self._flush_loop())
        # The newcomer's snapshot is a full pass; the others get from it only what changed.
        self.want = Want.everything()
        self.wake.set()

    async def leave(self, stream: EventStreamConsumer) -> None:
        self.streams.discard(stream)
        if self.streams or self._loop is not asyncio.get_running_loop():
            return
        tasks = [t for t in (self.task, self.flusher) if t is not None]
        channel, self.task, self.flusher, self.channel = self.channel, None, None, None
        await cancel_all(tasks)
        if channel is not None:
            await get_channel_layer().group_discard(GROUP, channel)

    # -- hints ----------------------------------------------------------------------------

    # How often the hub renews its group membership. A restarted Redis has forgotten every
    # group (and channels_redis expires them after a day anyway); receives on the new server
    # succeed but bring nothing, so without renewal an open console would go deaf for good.
    rejoin_seconds: float = 5.0

    async def _pump(self, layer: Any, channel: str) -> None:
        """Deliver the group's hints; outlive the channel layer going away (Redis restarted)."""
        loop = asyncio.get_running_loop()
        joined_at = loop.time()
        backoff = 0.5
        # One receive stays pending across the renewal timeouts: cancelling a channels_redis
        # receive drops what it has already buffered for the channel.
        receiving: asyncio.Future[Any] | None = None
        try:
            while True:
                try:
                    if loop.time() - joined_at >= self.rejoin_seconds:
                        await layer.group_add(GROUP, channel)
                        joined_at = loop.time()
                    if receiving is None:
                        receiving = asyncio.ensure_future(layer.receive(channel))
                    done, _ = await asyncio.wait({receiving}, timeout=max(joined_at + self.rejoin_seconds - loop.time(), 0.0))
                    if not done:
                        continue
                    message = receiving.result()
                    receiving = None
                    backoff = 0.5
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    receiving = None
                    log.warning("console hub lost the channel layer (%s: %s); rejoining in %.1fs",
                                type(exc).__name__, exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    joined_at = float("-inf")
                    self.resync()  # hints sent while it was away are lost: read everything again
                    continue
                if message.get("type") == "status.changed":
                    self.hint(message)
        finally:
            if receiving is not None:
                receiving.cancel()

    def resync(self) -> None:
        """Ask for a full pass at the next interval."""
        self.want = Want.everything()
        if self.wake is not None:
            self.wake.set()

    def hint(self, message: dict[str, Any]) -> None:
        logged = message.get("logged")
        if logged is not None:
            # New log lines of these jobs (engine.ledger.job_log): only their open pages show
            # them, and no panel; a job nobody is watching costs nothing.
            pages = self.watched() & {detail_name(str(job)) for job in logged}
            if not pages:
                return
            self.want.names |= pages
        else:
            self.want.add_hint(message)
        if self.wake is not None:
            self.wake.set()

    # -- flushing -------------------------------------------------------------------------

    def _interval(self) -> float:
        return min((s.flush_seconds for s in self.streams), default=EventStreamConsumer.flush_seconds)

    def _refresh(self) -> float:
        return min((s.refresh_seconds for s in self.streams), default=EventStreamConsumer.refresh_seconds)

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.wake is not None
        while True:
            until_refresh = self.last_full + self._refresh() - loop.time()
            if not self.want and until_refresh > 0:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=until_refresh)
                except TimeoutError:
                    pass
                continue
            # Throttle: the interval runs from the start of the last flush, so a change after a
            # quiet spell goes at once and a burst goes out in frames one interval apart.
            delay = self.last_start + self._interval() - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if loop.time() - self.last_full >= self._refresh():
                self.want = Want.everything()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed read must not end the stream for every console
                log.exception("console flush failed; retrying")
                await asyncio.sleep(max(self._interval(), 1.0))

    def watched(self) -> set[str]:
        """The fragments of the open pages: a job's detail, a jobs page's table."""
        return {s.page for s in self.streams if s.page is not None}

    async def flush(self) -> None:
        loop = asyncio.get_running_loop()
        want, self.want = self.want, Want()
        # An open job page's fragment (and a jobs page's table) is read in every pass, in the
        # same snapshot as the panels: one job's rows (one page of jobs) cost little, and a
        # hint-driven subset could miss a change the pass's version covers.
        want.names |= self.watched()
        self.last_start = loop.time()
        try:
            since = None if want.full else self.read_at
            rendered = await database_sync_to_async(rendering.render)(want, dict(self.known), since)
        except BaseException:
            want.merge(self.want)
            self.want = want
            raise
        self.renders += 1
        self.render_seconds += loop.time() - self.last_start
        if want.full:
            self.last_full = self.last_start
        for root in rendered.roots:
            if root in ALL:  # a page's fragment is read whole every pass: nothing to remember
                self.known[root] = rendered.digest(root)
        if not rendered.consistent:  # read again at the next interval, when the farm has settled
            self.want.merge(want)
        # A full pass, or one that read everything written since the previous pass, shows
        # everything up to its version. (A hint names its writer's clock, not the farm's
        # version, so hints alone never advance what is covered.)
        whole = rendered.consistent and (want.full or since is not None)
        if whole:
            self.read_at = rendered.reading
            self.covered = max(self.covered, rendered.version)
        began = loop.time()
        await self._fan_out(rendered)
        self.fan_out_seconds += loop.time() - began

    async def _fan_out(self, rendered: Rendered) -> None:
        now_ms = epoch_ms(timezone.now())
        version = str(self.covered) if rendered.consistent else f"{self.covered}+"
        frames: dict[tuple[tuple[str, ...], int | None], tuple[bytes, Delivery]] = {}
        swaps: dict[str, str] = {}
        for stream in list(self.streams):
            if not stream.started and not rendered.full:
                continue  # its snapshot is the full pass already asked for
            try:
                keys = changed_units(stream.sent, rendered, stream.roots(rendered))
            except Resync:
                stream.sent.clear()
                stream.started = False
                self.want = Want.everything()
                if self.wake is not None:
                    self.wake.set()
                continue
            retry = None if stream.started else stream.retry_ms
            # Nothing new to show, but if its content already arrived in an earlier frame read
            # past the version it claimed, a bare clock frame now claims it (an id is a promise
            # that everything up to it is on screen, so a client's latency is honest).
            if not keys and retry is None and stream.told >= self.covered:
                continue
            shape = (tuple(keys), retry)
            if shape not in frames:
                for key in keys:
                    if key not in swaps:
                        swaps[key] = rendered.oob(key)
                html = "\n".join([clock_span(now_ms, version), *(swaps[k] for k in keys)])
                frames[shape] = (sse_frame(html, event_id=str(self.covered), retry_ms=retry), Delivery(rendered, keys))
                self.frames_built += 1
            frame, delivery = frames[shape]
            try:
                await stream.send_body(frame, more_body=True)
            except Exception:  # the client left; its disconnect handler cleans up
                log.debug("event stream send failed", exc_info=True)
                continue
            stream.started = True
            stream.told = self.covered
            stream.flushes += 1
            self.frames_sent += 1
            delivery.apply(stream.sent)


HUB = Hub()


class EventStreamConsumer(AsyncHttpConsumer):
    # No channel of its own: the hub is the process's one listener. A stream with its own
    # channel would also die with the channel layer (a Redis restart), where the hub rejoins
    # and the stream carries on.
    channel_layer_alias = "provingsite.console.no-own-channel"
    # Class attributes so tests (and the bench) can shorten them; the hub uses the shortest
    # any open stream asks for.
    ping_seconds: float = 15.0
    # At most ten flushes a second: a burst costs few frames, and the longest a change waits
    # is one interval plus one pass (p99 target 250 ms with fifty consoles).
    flush_seconds: float = 0.1
    refresh_seconds: float = 5.0  # a full pass (stale flags, the task stream, lost hints) this often
    retry_ms: int = 2000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.streaming = False
        self.joined = False
        self.started = False  # has had its snapshot
        self.told = 0  # the id of the last frame sent
        self.tasks: list[asyncio.Task[None]] = []
        self.sent: dict[str, str] = {}  # unit key → digest of what this browser holds
        self.flushes = 0
        # ?job=<job_id>: the stream of that job's page, which shows its detail fragment only;
        # ?jobs=<query>: the jobs page's, which shows the table of that query only.
        self.job: str | None = None
        self.page: str | None = None  # that one fragment's name; None: the console's panels

    def roots(self, rendered: Rendered) -> list[str]:
        """The fragments of a pass this stream shows."""
        if self.page is not None:
            return [self.page]
        return [root for root in rendered.roots if root in ALL]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Also when the server cancels us (shutdown) rather than the client leaving.
            await self.disconnect()

    async def http_request(self, message: dict[str, Any]) -> None:
        # The base class ends the response as soon as handle() returns. A stream must stay
        # open, and the dispatch loop must stay free, so handle() returns after starting the
        # stream and the consumer lives on until http.disconnect.
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
        if not await database_sync_to_async(may_view)(self.scope.get("user")):
            await self.send_response(403, b"the console stream needs a staff or operator login\n",
                                     headers=[(b"content-type", b"text/plain; charset=utf-8")])
            return
        await self.send_headers(headers=[
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"x-accel-buffering", b"no"),  # no proxy buffering of the stream
        ])
        self.streaming = True
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.job = query["job"][0] if query.get("job") else None
        if self.job is not None:
            self.page = detail_name(self.job)
        elif "jobs" in query:  # the page's query, made canonical: equal views share one fragment
            self.page = jobs_name(JobsQuery.decode(query["jobs"][0]))
        # Joined before its snapshot is read, so a change committed meanwhile is not missed.
        await HUB.join(self)
        self.joined = True
        self.tasks = [asyncio.create_task(self.pinger())]

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
        await cancel_all(tasks)
        if self.joined:
            self.joined = False
            await HUB.leave(self)

