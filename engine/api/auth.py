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
import threading
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from engine.api.errors import ApiError
from engine.api.throttle import wait_for
from engine.models import DEFAULT_MAX_ACTIVE_JOBS, ApiToken, TokenScope
from engine.states import Priority

TOKEN_PREFIX = "ps_"
PREFIX_CHARS = 10
# last_used_at is for operators, not accounting: writing it once a minute at most keeps a
# busy client from queueing writes behind the engine's on SQLite.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# A live token is remembered this long: a poll every few milliseconds must not cost a
# database query each to learn what it learnt a moment ago. A change made in this process
# (revocation, an edit in the admin) is seen at once; one made by another process (the
# createtoken --revoke command) within this many seconds.
TOKEN_CACHE_SECONDS = 2.0


class TokenError(ValueError):
    """A token could not be issued or revoked (name taken, no such token)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class ScopeDefault:
    """Stands for "what this token's scope gets" where None already means "no cap"."""


SCOPE_DEFAULT = ScopeDefault()


def scope_limits(scope: str) -> tuple[int, int | None]:
    """(max_priority, max_active_jobs) a new token of ``scope`` gets: operators any and none."""
    if scope == TokenScope.OPERATOR:
        return int(Priority.CRITICAL), None
    return int(Priority.NORMAL), DEFAULT_MAX_ACTIVE_JOBS


def issue_token(name: str, scope: str = TokenScope.CLIENT, *, max_priority: int | None = None,
                max_active_jobs: int | None | ScopeDefault = SCOPE_DEFAULT) -> tuple[ApiToken, str]:
    """A new token for ``name``: the record, and the token itself (shown once, never stored).

    The limits default to the scope's (scope_limits); ``max_active_jobs=None`` is no cap."""
    if scope not in TokenScope.values:
        raise TokenError(f"unknown scope {scope!r}; expected one of {', '.join(TokenScope.values)}")
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name")
    default_priority, default_active = scope_limits(scope)
    priority = default_priority if max_priority is None else max_priority
    if priority not in Priority.values:
        raise TokenError(f"unknown priority {priority!r}; expected 0 (critical) .. 3 (low)")
    active = default_active if isinstance(max_active_jobs, ScopeDefault) else max_active_jobs
    if active is not None and active < 1:
        raise TokenError("a cap on active jobs must be at least 1 (or none)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            record = ApiToken.objects.create(name=name, scope=scope, prefix=token[:PREFIX_CHARS],
                                             token_hash=hash_token(token), max_priority=priority,
                                             max_active_jobs=active)
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
        record = token_for(token.strip())
        if record is not None:
            wait = wait_for(record)
            if wait > 0:
                raise ApiError(429, "rate_limited", None,
                               f"this token is over its request rate; retry in {wait:.1f} s", retry_after=wait)
        return record


# ---- people: who may see the whole farm ------------------------------------------------

OPERATOR_GROUP = "operator"  # created by migration 0004_operator_group


def can_view(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Staff, and members of the operator group, see every job, /status and the console."""
    if not user.is_authenticated or not user.is_active:
        return False
    return bool(getattr(user, "is_staff", False)) or user.groups.filter(name=OPERATOR_GROUP).exists()  # type: ignore[union-attr]
