"""``GET /stats``: throughput and cost per kind and per host over a range (engine.status.stats),
and ``GET /history``: the range's series in buckets (engine.status.history), for operator tokens
(a client token sees only its own jobs, not the farm). /history/ in the console is the same two
reads: for one range they give the same figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router, Schema
from pydantic import Field

from engine.api.auth import client_of
from engine.api.errors import ApiError
from engine.api.schemas import ErrorOut
from engine.status.history import MAX_BUCKETS, read_history
from engine.status.read import one_snapshot
from engine.status.stats import stats

router = Router(tags=["stats"])


class Range(Schema):
    since: datetime | None = Field(None, description="Start of the range (ISO 8601); default: a day before `until`")
    until: datetime | None = Field(None, description="End of the range (ISO 8601); default: now")


def _utc(value: datetime | None, default: datetime) -> datetime:
    if value is None:
        return default
    return (value if timezone.is_aware(value) else timezone.make_aware(value, UTC)).astimezone(UTC)


def operator_range(request: HttpRequest, span: Range) -> tuple[datetime, datetime]:
    """The range a farm-wide read covers (default: the day before now), for operator tokens
    only: a 403 for a client token, a 400 naming ``since`` for an empty range."""
    if not client_of(request).sees_every_job:
        raise ApiError(403, "forbidden", "Authorization", "the farm's figures need an operator token")
    until = _utc(span.until, timezone.now())
    since = _utc(span.since, until - timedelta(days=1))
    if since >= until:
        raise ApiError(400, "invalid", "since", "must be before until")
    return since, until


@router.get("/stats", response={200: dict[str, Any], 400: ErrorOut, 401: ErrorOut, 403: ErrorOut},
            summary="Proofs and partitions per hour, phase durations, device busy and cost per proof")
def get_stats(request: HttpRequest, span: Query[Range]) -> dict[str, Any]:
    """Per kind and per host, for the partitions finished in the range: proofs/hour,
    partitions/hour, mean, p50 and p95 of queue, synthesis, GPU and finalize, the device busy
    fraction and the cost per proof (from each host's PROVINGSITE_HOST_COST_PER_HOUR); and per
    circuit, farm-wide and per host, the p50 and p95 of a job's duration from its first claim."""
    return stats(*operator_range(request, span))


class Buckets(Range):
    buckets: int = Field(60, ge=1, le=MAX_BUCKETS, description=f"How many buckets the range is cut into (1..{MAX_BUCKETS})")


@router.get("/history", response={200: dict[str, Any], 400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 422: ErrorOut},
            summary="The range's series per bucket: proofs and failures per minute, queue depth, active partitions, "
                    "each worker's utilisation")
def get_history(request: HttpRequest, span: Query[Buckets]) -> dict[str, Any]:
    """Per bucket of the range (default: the day before now, in 60 buckets): proofs and failed
    attempts per minute, queue depth and active partitions (the most at once, and the
    time-weighted mean), and each worker's utilisation; each series' peak (its largest bucket)
    and mean (over the range). The console's /history/ draws these very figures."""
    since, until = operator_range(request, span)
    with one_snapshot():
        return read_history(since, until, span.buckets, now=min(timezone.now(), until)).as_json()
