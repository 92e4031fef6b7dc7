"""Who is on the other end of a request: the TCP peer, not what a header claims.

The peer is the address the server accepted the connection from (the ASGI scope's client;
provingsite/server.py never rewrites it from a header). A client can put anything in
``X-Forwarded-For``, so the header is believed only when the peer is one of
``PROVINGSITE_TRUSTED_PROXIES``, and then only its last hop: the address that proxy itself
saw and appended (nginx's ``$remote_addr``), never the ones the client sent before it.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def tcp_peer(request: HttpRequest) -> str:
    scope = getattr(request, "scope", None)  # an ASGI request; the test client's has REMOTE_ADDR only
    client = scope.get("client") if isinstance(scope, dict) else None
    if client:
        return str(client[0])
    return str(request.META.get("REMOTE_ADDR", ""))


def client_address(request: HttpRequest) -> str:
    """The peer, or the last forwarded hop when the peer is a trusted proxy."""
    peer = tcp_peer(request)
    if peer not in set(settings.PROVINGSITE.get("TRUSTED_PROXIES") or []):
        return peer
    hops = [hop.strip() for hop in request.headers.get("X-Forwarded-For", "").split(",")]
    return hops[-1] if hops[-1] else peer
