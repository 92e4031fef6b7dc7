"""The capacity page: the range's recorded arrivals replayed on other farms (engine.status.capacity),
the same figures as ``GET /api/v1/capacity``, as a table per fragment with a form to ask again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine.console.auth import require_viewer
from engine.console.style import circuit_label
from engine.figures import DEVICE, FINALIZE, JOB_QUEUE, MODELLED_JOB_QUEUE, MODELLED_TOTAL, SYNTHESIS, TOTAL
from engine.format import fmt_bytes, fmt_ms
from engine.status.capacity import TIMES, capacity, check_replays, parse_budgets, parse_hosts
from engine.status.records import registered_names

WINDOWS = {"hour": (timedelta(hours=1), "hour"), "6h": (timedelta(hours=6), "6 hours"),
           "day": (timedelta(days=1), "day"), "week": (timedelta(days=7), "7 days")}


def _moment(text: str) -> datetime | None:
    """A datetime-local or ISO 8601 value, as UTC (a naive one is UTC); None if empty."""
    if not text:
        return None
    value = parse_datetime(text)
    if value is None:
        raise ValueError(f"not a date and time: {text!r}")
    return (value if timezone.is_aware(value) else value.replace(tzinfo=UTC)).astimezone(UTC)


def _ask(params: Any) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """What the form asks (the arguments of ``capacity``), the form's values, and the errors by field."""
    chosen = {name: str(params.get(name, "")).strip()
              for name in ("hosts", "budget", "since", "until", "window", "times")}
    chosen["window"] = chosen["window"] if chosen["window"] in WINDOWS else "day"
    chosen["times"] = chosen["times"] if chosen["times"] in TIMES else "drawn"
    errors: dict[str, str] = {}
    ask: dict[str, Any] = {"hosts": None, "budgets": None}
    for name, parse, key in (("hosts", parse_hosts, "hosts"), ("budget", parse_budgets, "budgets")):
        try:
            ask[key] = parse(chosen[name]) if chosen[name] else None
        except ValueError as exc:
            errors[name] = str(exc)
    try:
        check_replays(ask["hosts"], ask["budgets"])
    except ValueError as exc:
        errors.setdefault("hosts", str(exc))
    moments: dict[str, datetime | None] = {}
    for name in ("since", "until"):
        try:
            moments[name] = _moment(chosen[name])
        except ValueError as exc:
            errors[name], moments[name] = str(exc), None
    ask["until"] = moments["until"] or timezone.now()
    ask["since"] = moments["since"] or ask["until"] - WINDOWS[chosen["window"]][0]
    if ask["since"] >= ask["until"]:
        errors["since"] = "must be before until"
    return ask, chosen, errors


def _secs(value: float | None) -> str:
    return fmt_ms(None if value is None else value * 1000)


def _farm_cells(farm: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
    is_current = current is not None and (farm["hosts"], farm["memory_budget_bytes"]) == (
        current["hosts"], current["memory_budget_bytes"])
    cost = farm["cost_per_proof"]
    return {"hosts": farm["hosts"], "budget": fmt_bytes(farm["memory_budget_bytes"]), "current": is_current,
            "claim_p50": _secs(farm["claim_wait"]["p50_s"]), "claim_p95": _secs(farm["claim_wait"]["p95_s"]),
            "done_p50": _secs(farm["done_wait"]["p50_s"]), "done_p95": _secs(farm["done_wait"]["p95_s"]),
            "missed": farm["missed_deadlines"], "failed": farm["failed_jobs"],
            "proofs_per_hour": f"{farm['proofs_per_hour']:.1f}", "cost": "—" if cost is None else f"{cost:.4f}"}


def _circuit_cells(row: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {"circuit": row["circuit"], "label": circuit_label(row["circuit"], names),
            "partitions": row["partitions_recorded"],
            "synthesis": _secs(row["synthesis_p50_s"]), "device": _secs(row["device_p50_s"]),
            "finalize": _secs(row["finalize_p50_s"]), "memory": fmt_bytes(row["memory_bytes"]),
            "key": fmt_bytes(row["key_bytes"]) if row["key_bytes"] else "—"}


@login_required
def capacity_page(request: HttpRequest) -> HttpResponse:
    require_viewer(request)
    ask, chosen, errors = _ask(request.GET)
    answer = None if errors else capacity(ask["since"], ask["until"], ask["hosts"], ask["budgets"],
                                          times=chosen["times"])
    context: dict[str, Any] = {"chosen": chosen, "errors": errors, "windows": [(k, v[1]) for k, v in WINDOWS.items()],
                               "since": ask["since"], "until": ask["until"], "answer": answer,
                               "figure_legend": (JOB_QUEUE, TOTAL, MODELLED_JOB_QUEUE, MODELLED_TOTAL, SYNTHESIS, DEVICE,
                                                 FINALIZE)}
    if answer is not None:
        current = answer["current"]
        context["current"] = current and {**current, "budget": fmt_bytes(current["memory_budget_bytes"])}
        context["measured"] = {"claim_p50": _secs(answer["measured"]["claim_wait"]["p50_s"]),
                               "claim_p95": _secs(answer["measured"]["claim_wait"]["p95_s"]),
                               "done_p50": _secs(answer["measured"]["done_wait"]["p50_s"]),
                               "done_p95": _secs(answer["measured"]["done_wait"]["p95_s"]),
                               "missed": answer["measured"]["missed_deadlines"]}
        context["farms"] = [_farm_cells(f, current) for f in answer["farms"]]
        names = registered_names(c["circuit"] for c in answer["circuits"])
        context["circuits"] = [_circuit_cells(c, names) for c in answer["circuits"]]
    return render(request, "console/capacity.html", context)
