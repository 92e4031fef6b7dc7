"""The web server: Daphne, with request bodies bounded before they are read.

Stock Daphne (over Twisted) takes a request's whole body before the application sees the
request: Twisted spools it, parses a multipart body into memory itself, and Daphne then
queues all of it as ASGI messages at once. Here, at the moment the headers are in:

* a declared Content-Length over the path's limit (provingsite/bodylimit.py), or a body
  sent with no credentials, is answered 413/401 at once and the body is never read;
* credentials that are there are looked up (provingsite/credentials.py) with the connection
  paused, so a dead token is answered 401 with its body still unsent;
* a chunked body is counted as it arrives and cut off with a 413 at the limit;
* an accepted body is spooled to a temporary file (Twisted's, on disk past 100 kB) and the
  application reads it from there a chunk at a time, on demand, not as one burst in memory.

The client address in the ASGI scope is always the TCP peer: proxy headers are never used
to rewrite it (engine/api/peer.py decides whom to believe). Run it as
``python -m provingsite.server -b 127.0.0.1 -p 8000``; ``manage.py runengine --serve`` uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
from collections.abc import Awaitable, Callable
from typing import IO, Any

from daphne.endpoints import build_endpoint_description_strings
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server

from provingsite.bodylimit import UNAUTHORIZED, Refusal, body_limit, judge, needs_credentials, request_path, too_large
from provingsite.credentials import credentials_live

log = logging.getLogger("provingsite.server")

READ_CHUNK = 64 * 1024
# After a refusal the client may still be sending: keep reading (and dropping) for a while so
# it can read the answer, rather than resetting the connection under it.
LINGER_SECONDS = 5.0
BODY_KEY = "provingsite.body"  # the scope key that carries the spooled body to SpooledBody

Message = dict[str, Any]
_REASONS = {401: b"Unauthorized", 413: b"Content Too Large"}


class BoundedRequest(WebRequest):
    """A Twisted request that judges its body from the headers and never holds it whole."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Twisted would otherwise parse a multipart POST into memory before Daphne runs.
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def gotLength(self, length: int | None) -> None:
        self.body_limit = 0
        self.received = 0
        self.refused = False
        self.body_file: IO[bytes] | None = None
        self.credentials_ok: bool | None = True  # None while the look-up runs
        self.waiting: tuple[bytes, bytes, bytes] | None = None  # a body complete before the verdict
        method = self.channel._command.decode("latin-1")
        path = request_path(self.channel._path)
        authorization, cookie = self._header(b"Authorization"), self._header(b"Cookie")
        refusal = judge(method, path, length, authorization, cookie)
        if refusal is not None:
            self.content = io.BytesIO()
            self.refuse(refusal)
            return
        self.body_limit = body_limit(method, path)
        super().gotLength(length)
        if needs_credentials(path, length):
            self._look_up(authorization, cookie)

    def _look_up(self, authorization: str | None, cookie: str | None) -> None:
        """Hold the body back (TCP backpressure) while the database says whether to read it."""
        from channels.db import database_sync_to_async

        self.credentials_ok = None
        # Twisted would invite the body ("100 Continue") as soon as this returns; that waits
        # for the verdict now.
        expect = self.requestHeaders.getRawHeaders(b"Expect") or [b""]
        self.continue_after = expect[0].lower() == b"100-continue" and self.channel._version == b"HTTP/1.1"
        self.requestHeaders.removeHeader(b"Expect")
        self.channel.transport.pauseProducing()
        future = asyncio.ensure_future(database_sync_to_async(credentials_live)(authorization, cookie))
        future.add_done_callback(self._looked_up)

    def _looked_up(self, future: asyncio.Future[bool]) -> None:
        if self._disconnected or future.cancelled():
            return
        failed = future.exception()
        if failed is not None:  # the database is Django's to report; let the request through
            log.warning("credentials look-up failed, leaving it to the application: %s", failed)
        self.credentials_ok = failed is not None or bool(future.result())
        if not self.credentials_ok:
            self.content.close()
            self.content = io.BytesIO()
            self.refuse(UNAUTHORIZED)
        elif self.continue_after and self.waiting is None:
            self.channel.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.channel.transport.resumeProducing()
        if self.waiting is not None:
            self.requestReceived(*self.waiting)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return  # read only to let the client see the answer
        self.received += len(data)
        if self.received > self.body_limit:
            self.content.close()
            self.content = io.BytesIO()
            self.refuse(too_large(self.body_limit))
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self.refused:
            self.channel.transport.loseConnection()
            return
        if self.credentials_ok is None:
            self.waiting = (command, path, version)
            return
        self.waiting = None
        super().requestReceived(command, path, version)

    def process(self) -> Any:
        # Daphne queues whatever is in `content` at once; it gets an empty file and the
        # application reads the real one through SpooledBody, a chunk per receive().
        self.body_file, self.content = self.content, io.BytesIO()
        if self.requestHeaders.hasHeader(b"Transfer-Encoding"):
            # The whole body is spooled by now, so its length is known: Django reads a
            # multipart body only up to Content-Length, and a chunked one has none.
            self.requestHeaders.removeHeader(b"Transfer-Encoding")
            self.requestHeaders.setRawHeaders(b"Content-Length", [b"%d" % self.received])
        return super().process()

    def refuse(self, refusal: Refusal) -> None:
        """Answer now, before the body, and close once the client has had time to read it."""
        self.refused = True
        self.channel.persistent = False
        self.requestHeaders.removeHeader(b"Expect")  # no "100 Continue" after the answer
        transport = self.channel.transport
        transport.write(_refusal_bytes(refusal))
        transport.loseWriteConnection()
        from twisted.internet import reactor

        # twisted types the global reactor as its interface class: mypy reads callLater as unbound.
        self._linger = reactor.callLater(LINGER_SECONDS, transport.abortConnection)  # type: ignore[arg-type]

    def connectionLost(self, reason: Any) -> None:
        linger = getattr(self, "_linger", None)
        if linger is not None and linger.active():
            linger.cancel()
        self._close_body()
        super().connectionLost(reason)

    def finish(self) -> None:
        self._close_body()
        super().finish()

    def _close_body(self) -> None:
        body = getattr(self, "body_file", None)
        if body is not None:
            body.close()

    def _header(self, name: bytes) -> str | None:
        values = self.requestHeaders.getRawHeaders(name)
        return b"; ".join(values).decode("latin-1") if values else None


def _refusal_bytes(refusal: Refusal) -> bytes:
    payload = json.dumps({"error": refusal.error, "field": refusal.field, "detail": refusal.detail}).encode()
    head = [b"HTTP/1.1 %d %s" % (refusal.status, _REASONS.get(refusal.status, b"Refused")),
            b"Content-Type: application/json", b"Content-Length: %d" % len(payload), b"Connection: close"]
    if refusal.status == 401:
        head.append(b'WWW-Authenticate: Bearer realm="provingsite"')
    return b"\r\n".join(head) + b"\r\n\r\n" + payload


class BoundedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedRequest
        return protocol


class SpooledBody:
    """ASGI receive(): the spooled body a chunk per call, then the server's own messages."""

    def __init__(self, body: IO[bytes] | None, receive: Callable[[], Awaitable[Message]]) -> None:
        self.body, self.receive = body, receive

    async def __call__(self) -> Message:
        if self.body is not None:
            chunk = self.body.read(READ_CHUNK)
            more = len(chunk) == READ_CHUNK
            if not more:
                self.body.close()
                self.body = None
            return {"type": "http.request", "body": chunk, "more_body": more}
        while True:
            message = await self.receive()
            if message["type"] != "http.request":  # skip Daphne's empty placeholder
                return message


def with_spooled_body(application: Any) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            scope = dict(scope)
            receive = SpooledBody(scope.pop(BODY_KEY, None), receive)
        await application(scope, receive, send)

    return app


class BoundedServer(Server):
    """Daphne's server with BoundedRequest; proxy headers are never trusted here."""

    def __init__(self, application: Any, **kwargs: Any) -> None:
        for name in ("proxy_forwarded_address_header", "proxy_forwarded_port_header", "proxy_forwarded_proto_header"):
            kwargs.pop(name, None)
        super().__init__(application=with_spooled_body(application), **kwargs)

    # Daphne's run() builds its own HTTPFactory and listens with it at once; taking the
    # assignment over is the one seam that keeps the rest of run() Daphne's.
    @property
    def http_factory(self) -> HTTPFactory:
        return self._bounded_factory

    @http_factory.setter
    def http_factory(self, _stock: HTTPFactory) -> None:
        self._bounded_factory = BoundedHTTPFactory(self)

    def create_application(self, protocol: Any, scope: dict[str, Any]) -> Any:
        body = getattr(protocol, "body_file", None)
        if body is not None:
            scope = {**scope, BODY_KEY: body}
            protocol.body_file = None  # the application owns it now (SpooledBody closes it)
        return super().create_application(protocol, scope)


def build_server(host: str, port: int, **kwargs: Any) -> BoundedServer:
    from provingsite.asgi import application

    return BoundedServer(application, endpoints=build_endpoint_description_strings(host=host, port=port), **kwargs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m provingsite.server", description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--bind", default="127.0.0.1", help="address to listen on")
    parser.add_argument("-p", "--port", type=int, default=8000, help="port to listen on")
    args = parser.parse_args(argv)
    print(f"console and API on http://{args.bind}:{args.port}/", flush=True)
    build_server(args.bind, args.port).run()


if __name__ == "__main__":
    main()
