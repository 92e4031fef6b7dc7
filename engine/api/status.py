"""GET /status: the farm's status as JSON (engine.status.farm), a superset of the seed's.

Readable by a logged-in console viewer (staff or the operator group) or with an operator
API token (it names every client's jobs), so the console's users and the farm's scripts can
poll it. The shape is pinned by
status.schema.json next to this file.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from engine.api.auth import bearer_token, can_view, token_for
from engine.api.errors import body
from engine.api.moments import MomentEncoder
from engine.status.farm import farm_snapshot

SCHEMA_PATH = Path(__file__).with_name("status.schema.json")


@cache
def status_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None for a console login or an operator token; a 403 for a valid client token (known,
    but the farm's status names every client's jobs); else a 401."""
    if can_view(request.user):
        return None
    raw = bearer_token(request)
    token = token_for(raw) if raw is not None else None
    if token is not None and token.sees_every_job:
        return None
    if token is not None:
        return JsonResponse(body("forbidden", "Authorization", "this is a client token: /status names every "
                                 "client's jobs and needs an operator token or a console login"), status=403)
    response = JsonResponse(body("unauthorized", "Authorization",
                                 "log in to the console or send an operator token: 'Authorization: Bearer ps_…'"), status=401)
    response["WWW-Authenticate"] = 'Bearer realm="provingsite"'
    return response


@require_GET
def status(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    response = JsonResponse(farm_snapshot(), encoder=MomentEncoder)
    response["Cache-Control"] = "no-store"  # it is live; a cached copy is a wrong copy
    return response
