"""Bearer tokens for API clients: who is asking, read from the request.

A client token sees the jobs it submitted; an operator token sees every job and /status.
Tokens are issued, revoked and stamped by engine.ledger.tokens; this module only reads them.
"""

from __future__ import annotations

import hmac
import threading
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, PermissionsMixin
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from engine.api.errors import ApiError
from engine.api.throttle import wait_for
from engine.headers import bearer
from engine.ledger.tokens import TOKEN_PREFIX, hash_token, mark_used
from engine.models import ApiToken

# last_used_at is for operators, not accounting: writing it once a minute at most keeps a
# busy client from queueing writes behind the engine's on SQLite.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# A live token is remembered this long: a poll every few milliseconds must not cost a
# database query each to learn what it learnt a moment ago. A change made in this process
# (revocation, an edit in the admin) is seen at once; one made by another process (the
# createtoken --revoke command) within this many seconds.
TOKEN_CACHE_SECONDS = 2.0


class _LiveTokens:
    """Recently seen live tokens by digest, each for TOKEN_CACHE_SECONDS. Only live tokens are
    kept, so the table is never larger than the token table."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[ApiToken, float]] = {}
        self._lock = threading.Lock()

    def get(self, digest: str) -> ApiToken | None:
        with self._lock:
            entry = self._records.get(digest)
        if entry is None or entry[1] <= time.monotonic():
            return None
        return entry[0]

    def put(self, record: ApiToken) -> None:
        with self._lock:
            self._records[record.token_hash] = (record, time.monotonic() + TOKEN_CACHE_SECONDS)

    def forget(self, digest: str) -> None:
        with self._lock:
            self._records.pop(digest, None)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()


LIVE_TOKENS = _LiveTokens()


def _forget_token(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    LIVE_TOKENS.forget(instance.token_hash)


# Saved or deleted in this process (revoke_token, the admin): never answered from the cache.
post_save.connect(_forget_token, sender=ApiToken, dispatch_uid="engine.api.auth.forget-token-saved")
post_delete.connect(_forget_token, sender=ApiToken, dispatch_uid="engine.api.auth.forget-token-deleted")


def token_for(raw: str) -> ApiToken | None:
    """The live token a client presented, or None (unknown, malformed or revoked)."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    record = LIVE_TOKENS.get(digest)
    if record is None:
        record = ApiToken.objects.filter(token_hash=digest, revoked_at__isnull=True).first()
        # The lookup is by digest already; the constant-time compare is belt and braces.
        if record is None or not hmac.compare_digest(record.token_hash, digest):
            return None
        LIVE_TOKENS.put(record)
    now = timezone.now()
    if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
        mark_used(record, now)
    return record


def bearer_token(request: HttpRequest) -> str | None:
    """The token in ``Authorization: Bearer …``, if any."""
    return bearer(request.headers.get("Authorization"))


def client_of(request: HttpRequest) -> ApiToken:
    """The token that authenticated an API request: django-ninja sets ``request.auth`` to what
    TokenAuth returned, an attribute HttpRequest's type does not declare."""
    token = getattr(request, "auth", None)
    assert isinstance(token, ApiToken), "an API view runs only after TokenAuth"
    return token


class TokenAuth(HttpBearer):
    """django-ninja's bearer scheme, answering with our ApiToken record."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        record = token_for(token.strip())
        if record is not None:
            wait = wait_for(record)
            if wait > 0:
                raise ApiError(429, "rate_limited", None,
                               f"this token is over its request rate; retry in {wait:.1f} s", retry_after=wait)
        return record


class OperatorAuth(TokenAuth):
    """TokenAuth for operator-only routes: a client token is a 403 before the body is read, so
    a refused caller learns nothing of what a valid request would look like."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        record = super().authenticate(request, token)
        if record is not None and not record.sees_every_job:
            raise ApiError(403, "forbidden", "Authorization", "this route needs an operator token")
        return record


# ---- people: who may see the whole farm ------------------------------------------------

OPERATOR_GROUP = "operator"  # created by migration 0004_operator_group


def can_view(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Staff, and members of the operator group, see every job, /status and the console."""
    if not isinstance(user, PermissionsMixin) or not user.is_authenticated or not user.is_active:
        return False
    return bool(getattr(user, "is_staff", False)) or user.groups.filter(name=OPERATOR_GROUP).exists()
