"""API tokens as rows: issued, revoked, seen. The web reads tokens; only this module writes them.

A token is ``ps_`` + 32 random bytes (URL-safe base64). Only its SHA-256 is stored: a leaked
database does not leak working tokens, and because the token is long and random a plain
digest (no salt, no slow hash) is enough to make guessing useless. The prefix is kept in
clear so an operator can tell tokens apart in the admin.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from engine.models import DEFAULT_MAX_ACTIVE_JOBS, ApiToken, TokenScope
from engine.states import Priority

TOKEN_PREFIX = "ps_"
PREFIX_CHARS = 10


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
                max_active_jobs: int | None | ScopeDefault = SCOPE_DEFAULT,
                callback_url: str = "") -> tuple[ApiToken, str]:
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
                                             max_active_jobs=active, callback_url=callback_url)
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


def revoke_tokens(tokens: QuerySet[ApiToken]) -> int:
    """Revoke every live token of ``tokens`` (the admin's bulk action); how many were live."""
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def mark_used(record: ApiToken, now: datetime) -> None:
    """Record that a token was just presented (for operators: when was it last seen)."""
    ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
    record.last_used_at = now


def set_limits(record: ApiToken) -> None:
    """An operator's change of a token's limits (the admin's list and form): only the limits
    and the name are the operator's to change; the digest and the dates are not."""
    record.save(update_fields=["name", "scope", "max_priority", "max_active_jobs", "revoked_at", "callback_url"])


def delete_tokens(tokens: QuerySet[ApiToken]) -> int:
    """Delete tokens; the jobs they submitted stay, with no client."""
    count, _ = tokens.delete()
    return int(count)
