"""One error shape for every refusal: ``{"error": code, "field": name or null, "detail": text}``.

django-ninja's own handlers answer ``{"detail": …}`` with the status of their choice; ours
replace them so a client can always tell which field to fix. The server's own troubles have the
shape too: a database that does not answer is a 503 with Retry-After, a full disk a 507 naming
the directory.
"""

from __future__ import annotations

import errno
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja.errors import AuthenticationError, HttpError, ValidationError

from engine.ledger.submission import SubmissionRefused

if TYPE_CHECKING:
    from ninja import NinjaAPI

# Where pydantic's location starts with the request part (and, for bodies, the parameter's
# name), the client only cares about the rest.
_SOURCES = {"body", "query", "path", "form", "file", "header", "cookie"}
_UNION_TAGS = {"str", "int", "float", "bool", "dict", "list", "none", "function-after", "function-plain"}


class ApiError(HttpError):
    def __init__(self, status: int, error: str, field: str | None, detail: str,
                 retry_after: float | None = None) -> None:
        super().__init__(status, detail)
        self.error, self.field, self.detail = error, field, detail
        # Seconds a client should wait before trying again (429, 503): sent as Retry-After.
        self.retry_after = retry_after


def body(error: str, field: str | None, detail: str) -> dict[str, Any]:
    return {"error": error, "field": field, "detail": detail}


# Seconds a client waits before asking again while the database does not answer.
RETRY_AFTER_OUTAGE = 5


def outage_body() -> dict[str, Any]:
    return body("unavailable", None, "the database is not answering; retry after the time in Retry-After")


_BODY_SHAPES = frozenset({"kind", "circuit"})


def storage_named(filename: Any) -> str:
    """The directory a failed write was going to, by the name the operator set: the data
    directory (or the params or cache directory) when the path is inside it."""
    path = Path(str(filename or settings.DATA_DIR))
    for name, root in (("the data directory", settings.DATA_DIR), ("the params directory",
                       settings.PROVINGSITE["PARAMS_DIR"]), ("the cache directory", settings.PROVINGSITE["CACHE_DIR"])):
        if path == Path(root) or Path(root) in path.parents:
            return f"{name} {root}"
    return f"the directory {path.parent}"


def _field(loc: list[Any] | tuple[Any, ...], param_names: set[str]) -> str | None:
    parts = [str(p) for p in loc]
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    # A body schema parameter ("payload") or a Query[...] schema ("filters") is our name, not the client's.
    if len(parts) > 1 and parts[0] in param_names:
        parts = parts[1:]
    # The job body's shape ("kind" or "circuit", schemas.JobIn's tags) comes before its fields.
    if len(parts) > 1 and parts[0] in _BODY_SHAPES:
        parts = parts[1:]
    # Union members show up as tags ("str", "literal['a','b']", "int"): not a client's field.
    kept = []
    for part in parts:
        if part in _UNION_TAGS or "[" in part or "(" in part:
            break
        kept.append(part)
    return ".".join(kept) or None


def install(api: NinjaAPI) -> None:
    param_names = {"payload", "filters"}

    def respond(request: HttpRequest, status: int, content: dict[str, Any]) -> HttpResponse:
        return api.create_response(request, content, status=status)

    @api.exception_handler(ApiError)
    def api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        response = respond(request, exc.status_code, body(exc.error, exc.field, exc.detail))
        if exc.retry_after is not None:
            response["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return response

    @api.exception_handler(SubmissionRefused)
    def refused(request: HttpRequest, exc: SubmissionRefused) -> HttpResponse:
        # the submission rules' refusals (engine.ledger.submission): each kind carries its status
        return respond(request, exc.status, body(exc.code, exc.field, exc.message))

    @api.exception_handler(AuthenticationError)
    def unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = respond(request, 401, body("unauthorized", "Authorization",
                                              "send a live API token as 'Authorization: Bearer ps_…'"))
        response["WWW-Authenticate"] = 'Bearer realm="provingsite"'
        return response

    @api.exception_handler(ValidationError)
    def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        errors = exc.errors or [{}]
        first = errors[0]
        field = _field(first.get("loc", ()), param_names)
        detail = str(first.get("msg", "invalid request"))
        if first.get("type") == "json_invalid" or detail.lower().startswith("cannot parse request body"):
            field = field or "body"
        elif first.get("type") == "model_attributes_type" and field in _BODY_SHAPES:
            field = "body"  # a JSON body that is not an object: no field of it is at fault
        if len(errors) > 1:
            others = {f for e in errors[1:] if (f := _field(e.get("loc", ()), param_names))} - {field}
            if others:
                detail += f" (also: {', '.join(sorted(others))})"
        return respond(request, 400, body("invalid", field, detail))

    def outage(request: HttpRequest) -> HttpResponse:
        # the database refused or dropped the connection: the request may succeed once it is back
        response = respond(request, 503, outage_body())
        response["Retry-After"] = str(RETRY_AFTER_OUTAGE)
        return response

    @api.exception_handler(OperationalError)
    def refused_connection(request: HttpRequest, exc: OperationalError) -> HttpResponse:
        return outage(request)

    @api.exception_handler(InterfaceError)
    def dropped_connection(request: HttpRequest, exc: InterfaceError) -> HttpResponse:
        return outage(request)

    @api.exception_handler(OSError)
    def storage_full(request: HttpRequest, exc: OSError) -> HttpResponse:
        # A full disk is the server's and says where; any other OS error stays a 500.
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise exc
        where = storage_named(exc.filename)
        return respond(request, 507, body("insufficient_storage", getattr(exc, "field", None),
                                          f"no space left in {where}; nothing of this request was kept, "
                                          "send it again once the operator has made room"))

    @api.exception_handler(RequestDataTooBig)
    def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return respond(request, 413, body("too_large", "body", "the request body is larger than this API accepts"))

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return respond(request, 404, body("not_found", None, str(exc) or "not found"))

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        # ninja raises a bare HttpError(400) for a body that is not JSON at all.
        if exc.status_code == 400:
            return respond(request, 400, body("invalid", "body", str(exc)))
        return respond(request, exc.status_code, body("error", None, str(exc)))
