"""Are the credentials a request came with alive? Asked before its body is read.

A cheap look-up, not the authorisation itself (the API and the console still decide what the
caller may do): a bearer token that exists and is not revoked, or a session that holds a
logged-in user. Enough that a made-up ``Authorization: Bearer x`` cannot make the server
spool an upload it will refuse anyway.
"""

from __future__ import annotations

from importlib import import_module

from django.conf import settings

from engine.headers import bearer
from provingsite.bodylimit import session_key


def credentials_live(authorization: str | None, cookie: str | None) -> bool:
    token = bearer(authorization)
    if token is not None:
        return _token_live(token)
    key = session_key(cookie)
    return key is not None and _session_live(key)


def _token_live(token: str) -> bool:
    from engine.ledger.tokens import TOKEN_PREFIX, hash_token
    from engine.models import ApiToken

    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return False
    return ApiToken.objects.filter(token_hash=hash_token(token), revoked_at__isnull=True).exists()


def _session_live(key: str) -> bool:
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    return "_auth_user_id" in store.load()
