"""``POST /keys/{circuit}/preload`` and ``POST /keys/{circuit}/evict``: operators' key control
(engine.ledger.key_requests), for operator tokens only.

The request is judged here from the records and written as one KeyRequest per host; each host's
engine is woken when it commits, carries it out and records the outcome on the row (its
``state``, ``reason``), which the answer's ``requests`` name by id. A preload that does not fit a host's
free budget is a 409 naming the host, its free bytes and what the key needs.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from ninja import Body, Router, Schema, Status
from pydantic import Field

from engine.api.auth import OperatorAuth, client_of
from engine.api.errors import ApiError
from engine.api.schemas import ErrorOut
from engine.ledger.key_requests import DoesNotFit, KeyRequestInvalid, ask
from engine.models import KeyRequest

router = Router(tags=["keys"], auth=OperatorAuth())
ERRORS: dict[int | tuple[int, ...], Any] = {(400, 401, 403, 404, 409): ErrorOut}


class PreloadIn(Schema):
    tier: str = Field("hot", description="hot (in memory) or warm (memory-mapped from disk)")
    host: str | None = Field(None, description="The engine host's name; every running host when absent")


class EvictIn(Schema):
    tier: str = Field("cold", description="The tier to demote to: warm (memory-mapped) or cold (on disk only)")
    host: str | None = Field(None, description="The engine host's name; every running host when absent")


class KeyRequestOut(Schema):
    id: int
    circuit_id: str
    host: str
    action: str
    tier: str
    needed_bytes: int
    state: str


class KeyRequestsOut(Schema):
    requests: list[KeyRequestOut]


def _out(rows: list[KeyRequest]) -> dict[str, Any]:
    return {"requests": [{"id": r.pk, "circuit_id": r.circuit_id, "host": r.host.name, "action": r.action,
                          "tier": r.tier, "needed_bytes": r.needed_bytes, "state": r.state} for r in rows]}


def _ask(request: HttpRequest, circuit: str, action: str, tier: str, host: str | None) -> Any:
    token = client_of(request)  # an operator's: OperatorAuth refused any other
    try:
        rows = ask(circuit, action, tier, host, requested_by=f"token {token.name}")
    except KeyRequestInvalid as exc:
        raise ApiError(exc.status, "not_found" if exc.status == 404 else "invalid", exc.field, exc.detail) from None
    except DoesNotFit as exc:
        return JsonResponse({"error": "conflict", "field": "tier", "detail": str(exc), "host": exc.host,
                             "free_bytes": exc.free_bytes, "needed_bytes": exc.needed_bytes}, status=409)
    return Status(202, _out(rows))


@router.post("/keys/{path:circuit}/preload", response={202: KeyRequestsOut, **ERRORS},
             summary="Preload a circuit's proving key to a tier, on a host or every running host")
def preload(request: HttpRequest, circuit: str, payload: Body[PreloadIn | None] = None) -> Any:
    """Each host named loads the key (hot: in memory with its fixed-base tables; warm: its points
    memory-mapped) as soon as it is asked. The body is optional: without one, hot on every
    running host. 409 when a host's free budget cannot hold the key."""
    payload = payload or PreloadIn.model_validate({})
    return _ask(request, circuit, KeyRequest.Action.PRELOAD, payload.tier, payload.host)


@router.post("/keys/{path:circuit}/evict", response={202: KeyRequestsOut, **ERRORS},
             summary="Demote a circuit's proving key to warm or cold, on a host or every running host")
def evict(request: HttpRequest, circuit: str, payload: Body[EvictIn | None] = None) -> Any:
    """Each host named demotes the key as soon as it is asked, if no partition is using it then
    (a key in use is refused, recorded on the request). The body is optional: without one, cold
    on every running host."""
    payload = payload or EvictIn.model_validate({})
    return _ask(request, circuit, KeyRequest.Action.EVICT, payload.tier, payload.host)
