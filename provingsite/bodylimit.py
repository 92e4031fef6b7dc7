"""How large a request body each path may send, and whether it must bring credentials.

Decided from the request line and headers alone, before a byte of the body is read
(provingsite/server.py asks at header time). Three sizes: none at all for methods that carry
no body (GET, HEAD, the SSE stream), ``PROVINGSITE_UPLOAD_LIMIT`` for the file uploads (a
custom job's zkey and wtns, a circuit's registration, a registered circuit's wtns), and
``PROVINGSITE_BODY_LIMIT`` (a few KiB: JSON and forms) for everything else.

A body may only come with credentials, a bearer token or a session cookie, because reading
a stranger's body costs as much as reading a client's. Login forms are the exception: they
are how a session starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from django.conf import settings

from engine.env import parse_size
from engine.headers import bearer

NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"})
# The multipart endpoints that take files: a custom job, a circuit's registration, and a
# registered circuit's job from a ready witness.
UPLOAD_PATHS = frozenset({"/api/v1/jobs/custom", "/api/v1/circuits"})
UPLOAD_PATTERN = re.compile(r"/api/v1/circuits/[^/]+/jobs")
# Any login form (the admin's, or the console's own) is posted before there is a session.
LOGIN_SEGMENT = "login"


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str
    field: str
    detail: str


def request_path(target: bytes) -> str:
    """The path Django will route, from the raw request target (origin or absolute form)."""
    text = target.decode("latin-1")
    return unquote(urlsplit(text).path if "://" in text else text.split("?", 1)[0])


def body_limit(method: str, path: str) -> int:
    """The most bytes of body this request may carry."""
    if method.upper() in NO_BODY_METHODS:
        return 0
    if is_upload(path):
        return parse_size(str(settings.PROVINGSITE["UPLOAD_LIMIT"]))
    return parse_size(str(settings.PROVINGSITE["BODY_LIMIT"]))


def is_upload(path: str) -> bool:
    """A path whose POST carries files (and so the upload limit)."""
    return path in UPLOAD_PATHS or UPLOAD_PATTERN.fullmatch(path) is not None


def is_login(path: str) -> bool:
    """/admin/login/, /login, /console/login/ …: a form posted before there is a session."""
    return path.rstrip("/").rsplit("/", 1)[-1] == LOGIN_SEGMENT


def session_key(cookie: str | None) -> str | None:
    for part in (cookie or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == settings.SESSION_COOKIE_NAME and value.strip():
            return value.strip()
    return None


def has_credentials(authorization: str | None, cookie: str | None) -> bool:
    """Presence only; provingsite/credentials.py then asks whether they are alive."""
    return bearer(authorization) is not None or session_key(cookie) is not None


def too_large(limit: int, declared: int | None = None) -> Refusal:
    if limit == 0:
        return Refusal(413, "too_large", "body", "this request takes no body")
    told = f"; this one declares {declared}" if declared is not None else ""
    return Refusal(413, "too_large", "body", f"the body is limited to {limit} bytes here{told}")


UNAUTHORIZED = Refusal(401, "unauthorized", "Authorization",
                      "a request body needs a live bearer token or session; none was sent")


def judge(method: str, path: str, length: int | None, authorization: str | None,
          cookie: str | None) -> Refusal | None:
    """A refusal for a request whose headers already say it must not be read, else None.

    ``length`` is the declared Content-Length, or None for a chunked body (counted later).
    """
    limit = body_limit(method, path)
    if length is not None and length > limit:
        return too_large(limit, length)
    if not needs_credentials(path, length) or has_credentials(authorization, cookie):
        return None
    return UNAUTHORIZED


def needs_credentials(path: str, length: int | None) -> bool:
    return length != 0 and not is_login(path)
