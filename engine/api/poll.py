"""Cheap answers to conditional job polls: a 304 without Django's request cycle.

A client following a job sends ``GET /api/v1/jobs/<id>`` with the ETag of its last answer,
over and over; nearly always nothing has changed. Through Django each of those polls cost
a new thread (Django's ASGI handler gives every request its own thread-sensitive executor),
a new database connection in it (thread-local, closed at the request's end) and the whole
middleware, routing and authentication stack, for an empty 304. Profiled under bench/load.py
that was most of the server's time, and it capped the server near 70 polls/s on 2 cores.

Here, in front of Django: a GET of one job (or of the job list) with ``If-None-Match`` and a
bearer token is looked up on this module's own worker thread, whose database connection
stays open: the token (engine.api.auth's short cache), then one query for the job's revisions
(for the list, the API's own page aggregate over the same filters). When the ETag
still names the job as the caller may see it, the answer is the 304, with the token's rate
spent as the API spends it. Anything else (no such job, another client's job, a changed
job, an unknown token, a token over its rate, a database error) goes on to Django, which
answers it exactly as before: this path can only say "unchanged", never refuse.

The ETags are the views' own (engine.api.etags._etag over the same three numbers, and its
page_etag), so a 304 here and one from the view are the same answer; tests/api/test_poll.py
holds them equal.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast
from urllib.parse import parse_qsl

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Field
from django.http.request import split_domain_port, validate_host
from pydantic import ValidationError

from engine.api.auth import token_for
from engine.api.errors import ApiError
from engine.api.etags import entity_tag
from engine.api.jobs import JobFilters, filtered_for, page_etag
from engine.api.throttle import wait_for
from engine.headers import bearer
from engine.models import Partition, ProofJob

log = logging.getLogger("engine.api")

Scope = dict[str, Any]  # an ASGI scope is a dict (as Django's ASGIHandler takes it)
App = Callable[[Scope, Any, Any], Awaitable[None]]

JOB_PATH = re.compile(r"/api/v1/jobs/(?P<job_id>[^/\x00]+)")
LIST_PATH = "/api/v1/jobs"
# Polls queued for the worker thread beyond this go the ordinary way (and meet admission
# control there): a bound on what this path can hold, not a second shedding policy.
MAX_QUEUED = 64


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _as_django_would_serve(scope: Scope) -> bool:
    """Django would answer this request itself rather than refuse or redirect it: its Host is
    allowed (else a 400), and it came over HTTPS where SECURE_SSL_REDIRECT asks for it (else a
    redirect). Anything else is left to Django's middleware to answer."""
    domain, _ = split_domain_port(_header(scope, b"host") or "")
    allowed = list(settings.ALLOWED_HOSTS) or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        return False
    if not getattr(settings, "SECURE_SSL_REDIRECT", False) or scope.get("scheme") == "https":
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not proxy:
        return False
    name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
    return (_header(scope, name) or "").split(",")[0].strip() == proxy[1]


def _tags(header: str) -> set[str]:
    """If-None-Match's entity tags, weak or strong (as engine.api.etags._matches reads them)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",")}


def _revisions_sql() -> str:
    """The job's id, its revision and the sum of its partitions' revisions, in one statement
    (one snapshot). Written out: the ORM's form of it groups by every column of the job (its proof
    and inputs among them) and costs a millisecond and a half where this costs a tenth."""
    quote, col = connection.ops.quote_name, _column
    job, part = ProofJob._meta, Partition._meta
    return (f"SELECT j.{col(job.pk)}, j.{col(job.get_field('revision'))}, "
            f"(SELECT SUM(p.{col(part.get_field('revision'))}) FROM {quote(part.db_table)} p "
            f"WHERE p.{col(part.get_field('job'))} = j.{col(job.pk)}) "
            f"FROM {quote(job.db_table)} j WHERE j.{col(job.get_field('job_id'))} = %s")


def _column(field: Field[Any, Any]) -> str:
    """A model field's column, quoted. Field.column is typed optional (it is unset until the
    field is added to a model); every field here belongs to one."""
    return connection.ops.quote_name(cast(str, field.column))


def _client_sql() -> str:
    return f" AND j.{_column(ProofJob._meta.get_field('client'))} = %s"


def unchanged_page_etag(raw_token: str, query: str, tags: set[str]) -> str | None:
    """The job list's ETag when it is among ``tags`` (engine.api.jobs computes it: the same
    filters, the same aggregate), else None. A query the API would refuse is left to it."""
    try:
        token = token_for(raw_token)
        if token is None:
            return None
        filters = JobFilters.model_validate(dict(parse_qsl(query, keep_blank_values=True)))
        etag = page_etag(filtered_for(token, filters), filters)
    except (ValidationError, ApiError, ValueError):
        return None
    except DatabaseError:
        log.warning("conditional poll fell back to the full path after a database error", exc_info=True)
        connection.close()
        return None
    if "*" not in tags and etag not in tags:
        return None
    return etag if wait_for(token) <= 0 else None


def unchanged_etag(raw_token: str, job_id: str, tags: set[str]) -> str | None:
    """The job's ETag when it is among ``tags`` for this caller and its rate allows a request;
    else None (Django then answers). Runs on the worker thread: it touches the database."""
    try:
        token = token_for(raw_token)
        if token is None:
            return None
        sql = _revisions_sql()
        params: list[str | int] = [job_id]
        if not token.sees_every_job:  # another client's job is "no such job" here too
            sql, params = sql + _client_sql(), [job_id, token.pk]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
    except DatabaseError:
        log.warning("conditional poll fell back to the full path after a database error", exc_info=True)
        connection.close()  # the next poll opens a fresh one
        return None
    if row is None:
        return None
    pk, revision, parts_revision = row
    etag = entity_tag("j", pk, revision, int(parts_revision or 0))
    if "*" not in tags and etag not in tags:
        return None
    if wait_for(token) > 0:
        return None  # over its rate: Django sends the 429 with Retry-After
    return etag


class ConditionalPolls:
    """ASGI middleware: unchanged-job polls answered 304 on one worker thread, the rest passed on."""

    def __init__(self, app: App, threads: int = 1) -> None:
        self.app = app
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="conditional-poll")
        self.queued = 0
        self.answered = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        probe = self._probe(scope)
        if probe is not None and self.queued < MAX_QUEUED:
            self.queued += 1
            try:
                check, token, key, tags = probe
                etag = await asyncio.get_running_loop().run_in_executor(self.pool, check, token, key, tags)
            finally:
                self.queued -= 1
            if etag is not None:
                self.answered += 1
                await send({"type": "http.response.start", "status": 304,
                            "headers": [(b"etag", etag.encode("latin-1")), (b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _probe(scope: Scope) -> tuple[Callable[[str, str, set[str]], str | None], str, str, set[str]] | None:
        """(check, token, job id or query, tags) of a conditional poll of one job or of the
        job list with a bearer token, else None."""
        if scope.get("type") != "http" or scope.get("method") != "GET":
            return None
        path = str(scope.get("path", ""))
        match = JOB_PATH.fullmatch(path)
        if match is None and path != LIST_PATH:
            return None
        condition = _header(scope, b"if-none-match")
        token = bearer(_header(scope, b"authorization"))
        if not condition or token is None or not _as_django_would_serve(scope):
            return None
        if match is not None:
            return unchanged_etag, token, match["job_id"], _tags(condition)
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        return unchanged_page_etag, token, query, _tags(condition)
