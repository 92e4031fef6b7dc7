"""Conditional reads: a poller sends back the ETag it got, and while nothing it would see has
changed it gets a 304. Every write to a job or partition counts up the row's revision, so
sums of revisions name the content."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def entity_tag(*parts: object) -> str:
    return '"' + ".".join(str(p) for p in parts) + '"'


def etag_matches(request: HttpRequest, etag: str) -> bool:
    """The request's If-None-Match names ``etag`` (weak or strong; or is ``*``)."""
    header = request.headers.get("If-None-Match", "")
    if not header:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or etag in tags


def not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    return response
