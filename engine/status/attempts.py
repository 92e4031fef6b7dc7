"""A partition's attempts, oldest first: those it kept when each ended and went back to the queue
(``Partition.attempts``, written by engine.ledger.claims.release_claim) and its current one
(the row's own moments). The job page and the API's job detail show each attempt's own queue
and phases (engine.figures), so a retried partition's figures are never another attempt's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from engine.figures import PHASES, TOTAL, AttemptTimes
from engine.models import Partition


@dataclass(frozen=True)
class Attempt:
    number: int  # the claim's count (the fencing token); 0 for a partition never claimed
    host: str | None
    worker: str | None  # "W0 cuda:0"
    times: AttemptTimes
    ended: str  # how it ended ("failed", "lapsed", "handed back", "cancelled" …); "" for the current one
    reason: str
    current: bool

    def figures_ms(self) -> dict[str, int | None]:
        """Each phase's and the total's milliseconds, by JSON field (queue_ms, synth_ms …)."""
        return {f.field: self.times.ms(f) for f in (*PHASES, TOTAL)}

    def as_json(self) -> dict[str, Any]:
        return {"attempt": self.number, "host": self.host, "worker": self.worker, "ended": self.ended or None,
                "reason": self.reason or None, "queued_at": self.times.queue_start, "claimed_at": self.times.claimed_at,
                "finished_at": self.times.finished_at, **self.figures_ms()}


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def kept(part: Partition, submitted_at: datetime) -> list[Attempt]:
    """The attempts ``part`` kept, oldest first (an entry it cannot read is skipped)."""
    out = []
    for entry in part.attempts or []:
        if not isinstance(entry, dict):
            continue
        times = AttemptTimes(submitted_at, _moment(entry.get("queued_at")), _moment(entry.get("claimed_at")),
                             _moment(entry.get("synth_started_at")), _moment(entry.get("synth_finished_at")),
                             _moment(entry.get("gpu_started_at")), _moment(entry.get("gpu_finished_at")),
                             _moment(entry.get("ended_at")))
        number = entry.get("attempt")
        out.append(Attempt(number if isinstance(number, int) else 0, _text(entry.get("host")),
                           _text(entry.get("worker")), times, str(entry.get("ended") or "?"),
                           str(entry.get("reason") or ""), current=False))
    return out


def _text(value: Any) -> str | None:
    return str(value) if value else None


def current(part: Partition, submitted_at: datetime) -> Attempt:
    """The row's own attempt (worker and host loaded by the caller's select_related)."""
    worker = f"{part.worker.label} {part.worker.device}" if part.worker_id and part.worker else None
    times = AttemptTimes(submitted_at, part.requeued_at, part.claimed_at, part.synth_started_at,
                         part.synth_finished_at, part.gpu_started_at, part.gpu_finished_at, part.finished_at)
    return Attempt(part.attempt if part.claimed_at else 0, part.host.name if part.host_id and part.host else None,
                   worker, times, "", part.error, current=True)


def attempts_of(part: Partition, submitted_at: datetime) -> list[Attempt]:
    """Every attempt of ``part``, the current one last."""
    return [*kept(part, submitted_at), current(part, submitted_at)]
