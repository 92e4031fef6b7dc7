"""Admission control: a bounded number of HTTP requests in flight, a short queue, then 503.

Without it a burst beyond what the server can serve piles up inside Daphne and Django until
every request, old and new, takes tens of seconds and many time out; with it the server keeps
serving what it admitted at its normal speed, and tells the rest at once to come back later
(503 with Retry-After), which a client or a proxy can act on. The long-lived SSE stream
(/events/) is not counted: it holds its connection for hours by design and costs nothing
between frames. Nor are the file uploads (provingsite.bodylimit.is_upload): their time in
flight is the client's network, not the server's work, and two slow uploads must not close
the API (their bodies have their own limit).

Counted in this process, on its event loop: the check is a comparison and an asyncio
semaphore, cheap enough to run before anything else looks at the request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from engine.console.paths import EVENTS_PATH, JOB_EVENTS_PATH
from provingsite.bodylimit import is_upload

Scope = dict[str, Any]  # an ASGI scope is a dict (as Django's ASGIHandler takes it)
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# A page's stylesheet and scripts arrive together right after the page and cost little to
# serve: refusing them would break a page that was itself admitted.
EXEMPT_PREFIXES = (EVENTS_PATH, JOB_EVENTS_PATH, "/static/", "/favicon.ico")
_BUSY_BODY = json.dumps({"error": "overloaded", "field": None,
                         "detail": "the server is at capacity; retry after the time in Retry-After"}).encode()


@dataclass(frozen=True)
class Limits:
    max_active: int  # requests being served at once
    max_waiting: int  # requests allowed to queue for a place
    wait_seconds: float  # how long a queued request may wait before it gets the 503
    retry_after: int = 1


class Admission:
    """ASGI middleware: serve at most ``max_active`` HTTP requests at once, queue a few."""

    def __init__(self, app: App, limits: Limits, exempt: tuple[str, ...] = EXEMPT_PREFIXES) -> None:
        self.app, self.limits, self.exempt = app, limits, exempt
        self.active = 0
        self.waiting = 0
        self.refused = 0
        self._places: asyncio.Semaphore | None = None

    @property
    def places(self) -> asyncio.Semaphore:
        # Made on first use, so it belongs to the server's running loop.
        if self._places is None:
            self._places = asyncio.Semaphore(self.limits.max_active)
        return self._places

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith(self.exempt) or (scope.get("method") == "POST" and is_upload(path)):
            await self.app(scope, receive, send)
            return
        if not await self._admit():
            self.refused += 1
            await self._busy(send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.places.release()

    async def _admit(self) -> bool:
        places = self.places
        if not places.locked():
            await places.acquire()  # a free place: returns at once
            return True
        if self.waiting >= self.limits.max_waiting or self.limits.wait_seconds <= 0:
            return False
        self.waiting += 1
        try:
            await asyncio.wait_for(places.acquire(), self.limits.wait_seconds)
            return True
        except TimeoutError:
            return False
        finally:
            self.waiting -= 1

    async def _busy(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(_BUSY_BODY)).encode()),
            (b"retry-after", str(self.limits.retry_after).encode())]})
        await send({"type": "http.response.body", "body": _BUSY_BODY})


def admitted(app: App) -> App:
    """``app`` behind admission control as the settings say; unchanged with shedding off."""
    from django.conf import settings

    knobs = settings.PROVINGSITE
    if not knobs["LOAD_SHEDDING"]:
        return app
    return Admission(app, Limits(max_active=knobs["ADMISSION_MAX_ACTIVE"], max_waiting=knobs["ADMISSION_MAX_WAITING"],
                                 wait_seconds=knobs["ADMISSION_WAIT_SECONDS"]))
