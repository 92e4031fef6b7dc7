"""``GET /kinds``: the built-in proof kinds described, so a client can build a request without
reading our source: each kind's inputs (with the types and patterns the API checks), its
partitions, its default priority, and its circuit at this service's scale."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from ninja import Router, Schema
from pydantic import Field

from engine.api.schemas import ErrorOut, InputsIn
from engine.circuits import kinds
from engine.circuits.limits import MAX_WINDOW_POST_PARTITIONS
from engine.states import KIND_PRIORITY, Priority

router = Router(tags=["kinds"])


class KindInputOut(Schema):
    name: str
    required: bool
    type: str = Field(description="JSON type: string or integer")
    description: str
    pattern: str | None = None
    minimum: int | None = None
    maximum: int | None = None


class KindOut(Schema):
    kind: str
    default_priority: str
    partitions_min: int
    partitions_max: int = Field(description="Equal to partitions_min where a kind's partition count is fixed")
    scale: str = Field(description="The circuit scale this service proves at")
    circuit_id: str
    curve: str
    constraints: int = Field(description="Constraints per partition")
    inputs: list[KindInputOut]
    links: dict[str, str]


def _input(name: str, required: bool) -> dict[str, Any]:
    # What the request schema itself checks, read from it, so this description cannot drift.
    spec = dict(InputsIn.model_json_schema()["properties"][name])
    for option in spec.pop("anyOf", []):  # an optional field: its non-null form
        if option.get("type") != "null":
            spec |= option
    return {"name": name, "required": required, "type": spec.get("type", "string"),
            "description": spec.get("description", ""), "pattern": spec.get("pattern"),
            "minimum": spec.get("minimum"), "maximum": spec.get("maximum")}


def describe(kind: str, scale: str) -> dict[str, Any]:
    shape = kinds.circuit_for(kind, scale)
    fixed = kinds.FIXED_PARTITIONS.get(kind)
    return {
        "kind": kind, "default_priority": Priority(KIND_PRIORITY[kind]).label,
        "partitions_min": fixed or 1, "partitions_max": fixed or MAX_WINDOW_POST_PARTITIONS,
        "scale": scale, "circuit_id": shape.circuit_id, "curve": kinds.CURVE, "constraints": shape.n_constraints,
        "inputs": [_input(name, required) for name, required in kinds.INPUTS[kind].items()],
        "links": {"verification_key": reverse("api-v1:get_kind_key", kwargs={"kind": kind})},
    }


@router.get("/kinds", response={200: list[KindOut], 401: ErrorOut}, summary="The built-in proof kinds and their inputs")
def list_kinds(request: HttpRequest) -> list[dict[str, Any]]:
    return [describe(kind, settings.PROVINGSITE["SCALE"]) for kind in kinds.KINDS]
