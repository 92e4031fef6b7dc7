"""A database outage is a 503 with Retry-After, never Django's 500 page.

Django hands any exception a request meets (in a view or in a middleware: the session, the
logged-in user) to the 500 handler while the exception is being handled, so this one handler
sees them all: a database that refuses or drops the connection (OperationalError) or a
connection that is already gone (InterfaceError) gets the API's JSON error shape for the API
and /status, and a plain page for the console, each with Retry-After. Anything else is
Django's own 500. The API's views answer the same 503 themselves (engine.api.errors), before
Django sees the exception.
"""

from __future__ import annotations

import json
import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults

from engine.api.errors import RETRY_AFTER_OUTAGE, outage_body

log = logging.getLogger("engine.web")
OUTAGES = (OperationalError, InterfaceError)


def is_outage(exc: BaseException | None) -> bool:
    return isinstance(exc, OUTAGES)


def unavailable(request: HttpRequest) -> HttpResponse:
    """The 503: JSON where a program reads the answer, a plain page where a person does."""
    if request.path.startswith("/api/") or request.path == "/status":
        response = HttpResponse(json.dumps(outage_body()), content_type="application/json; charset=utf-8", status=503)
    else:
        page = render_to_string("503.html", {"retry_after": RETRY_AFTER_OUTAGE})  # no request: reads no database
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_OUTAGE)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the 503 for an outage, Django's 500 for anything else."""
    exc = sys.exc_info()[1]
    if is_outage(exc):
        log.warning("%s %s answered 503: the database is not answering (%s)", request.method, request.path,
                    type(exc).__name__)
        return unavailable(request)
    return defaults.server_error(request)
