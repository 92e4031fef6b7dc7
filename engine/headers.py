"""The credentials a request's headers carry, read before anything else about the request.
No Django models here: the web server asks at header time, before Django is set up."""

from __future__ import annotations


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, if any."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
