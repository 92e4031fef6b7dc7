"""Bearer tokens for API clients.

A client token sees the jobs it submitted; an operator token sees every job and /status.
A token is ``ps_`` + 32 random bytes (URL-safe base64). Only its SHA-256 is stored: a leaked
database does not leak working tokens, and because the token is long and random a plain
digest (no salt, no slow hash) is enough to make guessing useless. The prefix is kept in
clear so an operator can tell tokens apart in the admin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from engine.models import ApiToken, TokenScope

TOKEN_PREFIX = "ps_"
PREFIX_CHARS = 10
# last_used_at is for operators, not accounting: writing it once a minute at most keeps a
# busy client from queueing writes behind the engine's on SQLite.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenError(ValueError):
    """A token could not be issued or revoked (name taken, no such token)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue_token(name: str, scope: str = TokenScope.CLIENT) -> tuple[ApiToken, str]:
    """A new token for ``name``: the record, and the token itself (shown once, never stored)."""
    if scope not in TokenScope.values:
        raise TokenError(f"unknown scope {scope!r}; expected one of {', '.join(TokenScope.values)}")
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            record = ApiToken.objects.create(name=name, scope=scope, prefix=token[:PREFIX_CHARS],
                                             token_hash=hash_token(token))
    except IntegrityError:
        raise TokenError(f"a token named {name!r} already exists") from None
    return record, token


def revoke_token(name: str) -> ApiToken:
    record = ApiToken.objects.filter(name=name).first()
    if record is None:
        raise TokenError(f"no token named {name!r}")
    if record.revoked_at is None:
        record.revoked_at = timezone.now()
        record.save(update_fields=["revoked_at"])
    return record


def token_for(raw: str) -> ApiToken | None:
    """The live token a client presented, or None (unknown, malformed or revoked)."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    record = ApiToken.objects.filter(token_hash=digest, revoked_at__isnull=True).first()
    # The lookup is by digest already; the constant-time compare is belt and braces.
    if record is None or not hmac.compare_digest(record.token_hash, digest):
        return None
    now = timezone.now()
    if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
        record.last_used_at = now
    return record


def bearer_token(request: HttpRequest) -> str | None:
    """The token in ``Authorization: Bearer …``, if any."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class TokenAuth(HttpBearer):
    """django-ninja's bearer scheme, answering with our ApiToken record."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        return token_for(token.strip())
