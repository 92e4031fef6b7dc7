"""``GET /capacity``: the range's recorded arrivals replayed on other farms (engine.status.capacity),
for operator tokens, as ``/stats`` is."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from pydantic import Field

from engine.api.errors import ApiError
from engine.api.schemas import ErrorOut
from engine.api.stats import Range, operator_range
from engine.status.capacity import (
    MAX_BUDGETS,
    MAX_FARMS,
    MAX_HOSTS,
    MAX_REPLAYS,
    TIMES,
    capacity,
    check_replays,
    parse_budgets,
    parse_hosts,
)

router = Router(tags=["stats"])


class Farms(Range):
    hosts: str | None = Field(None, description=f"Host counts to replay on, e.g. `3` or `2,4,6` (1..{MAX_HOSTS}, at "
                                                f"most {MAX_FARMS}); default: current − 1 … current + 3")
    budget: str | None = Field(None, description=f"Memory budgets per host, e.g. `256GiB` or `128GiB,512GiB` or "
                                                 f"bytes (at most {MAX_BUDGETS}, and {MAX_REPLAYS} farms in all); "
                                                 f"default: the current host's")
    times: str = Field("drawn", description="`drawn`: each partition's phases drawn (seeded) from its circuit's "
                                            "records; `own`: each job replays its partitions' own recorded phases")


@router.get("/capacity", response={200: dict[str, Any], 400: ErrorOut, 401: ErrorOut, 403: ErrorOut},
            summary="The range's arrivals replayed on N hosts and other memory budgets: waits, misses, cost")
def get_capacity(request: HttpRequest, farms: Query[Farms]) -> dict[str, Any]:
    """Replays the jobs submitted in the range (default: the last day) on farms of other sizes
    and budgets, with the service times the farm recorded, in a simulation of the engine's
    rules; per farm: p50/p95 wait to first claim and to done, deadlines missed, cost per proof,
    beside the measured waits. The replay is capped (``capped``, ``limits``) to stay quick."""
    since, until = operator_range(request, farms)
    try:
        hosts = parse_hosts(farms.hosts) if farms.hosts is not None else None
    except ValueError as exc:
        raise ApiError(400, "invalid", "hosts", str(exc)) from None
    try:
        budgets = parse_budgets(farms.budget) if farms.budget is not None else None
    except ValueError as exc:
        raise ApiError(400, "invalid", "budget", str(exc)) from None
    if farms.times not in TIMES:
        raise ApiError(400, "invalid", "times", f"must be one of {', '.join(TIMES)}")
    try:
        check_replays(hosts, budgets)
    except ValueError as exc:
        raise ApiError(400, "invalid", "hosts", str(exc)) from None
    return capacity(since, until, hosts, budgets, times=farms.times)
