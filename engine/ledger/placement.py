"""Placement by key: which pending partitions a host takes, by which proving keys each host holds.

A partition needs its job's key: a built-in kind's circuit (one per kind and scale) or a
registered circom circuit (its zkey's digest) is shared by every job of it; a client's uploaded
zkey is its job's alone, so no host holds it beforehand and it is placed like any other work.

Within the claim's own transaction, a host ranks the partitions first in the claim order:

* a priority class at a time, in the claim order's (engine.ledger.order): placement never
  serves a lower priority first because its key is resident; while any partition of a class is
  left for its key's holder, nothing of a lower class is taken;
* a partition whose latest start (engine.ledger.deadlines) falls within the wait is taken
  first, wherever its key is: waiting for its key's holder could make it late;
* then partitions whose key this host holds hot, then warm (a key it is loading for a
  partition it holds counts as hot: it will be by the time the next one is synthesized), each
  ahead of older work only if its job came within the wait of the oldest's, so no job waits
  behind an endless stream of another key's;
* then those it would load cold, unless another live, non-draining host holding that key
  has been free (asked for work with room to spare: ``EngineHost.free_at``) within the wait:
  that one is left for the holder. A holder busy for the whole wait stops asking, its
  ``free_at`` ages past the wait and any host takes the partition, so nothing starves.

The reads take no lock; the chosen rows are then locked one by one with SKIP LOCKED, each
re-checked as still unclaimed, so two hosts choosing the same row never wait for each other
(one takes it, the other its next choice) and the claim's lock order is what it was.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

from engine.ledger.bound import Bound
from engine.ledger.circuits import is_registered
from engine.ledger.order import claim_order
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JOB_ACTIVE, PARTITION_LIVE, PartitionState, ProofKind

WINDOW = 64  # partitions read from the head of the claim order per claim


class Tier(enum.IntEnum):
    """Where a host holds a key, best first (the order a host prefers its partitions in)."""

    HOT = 0
    WARM = 1
    COLD = 2


def enabled() -> bool:
    return bool(settings.PROVINGSITE["PLACEMENT"])


def wait_seconds() -> float:
    return float(settings.PROVINGSITE["PLACEMENT_WAIT_S"])


def uploaded(kind: str, circuit_id: str) -> bool:
    """A client's own zkey, uploaded with its job: no other job shares it."""
    return kind == ProofKind.CUSTOM and not is_registered(circuit_id)


def shared_key(kind: str, circuit_id: str) -> str:
    """The key a job's partitions need, as hosts list it; "" for an uploaded zkey (never shared)."""
    return "" if uploaded(kind, circuit_id) else circuit_id


def tiers_of(key_cache: Iterable[Any] | None) -> dict[str, Tier]:
    """A host's ``key_cache`` column as circuit id → tier; an entry naming no tier is hot (the
    one tier the cache had before tiers), one naming cold is not held."""
    out: dict[str, Tier] = {}
    for entry in key_cache or []:
        if isinstance(entry, dict) and entry.get("circuit_id") and entry.get("tier") != "cold":
            out[str(entry["circuit_id"])] = Tier.WARM if entry.get("tier") == "warm" else Tier.HOT
    return out


@dataclass(frozen=True)
class Candidate:
    pk: int
    key: str  # shared_key of its job
    priority: int
    latest_start_at: datetime | None
    submitted_at: datetime


@dataclass(frozen=True)
class Residency:
    """What one claim knows of the farm: this host's keys, and the keys another host holding
    them has been free to take within the wait."""

    mine: dict[str, Tier]
    kept: frozenset[str]

    def tier(self, key: str) -> Tier:
        return self.mine.get(key, Tier.COLD) if key else Tier.COLD


# Every claim runs these reads; they differ between claims only in the host's refused circuits,
# so each is compiled once per thread and shape (engine.ledger.bound): Django's compiler was a
# third of a claim's time.
_HELD = Bound(lambda shape, values: Partition.objects.filter(state__in=sorted(PARTITION_LIVE), host__isnull=False)
              .order_by().values_list("host_id", "job__circuit_id").distinct())
_HOSTS = Bound(lambda shape, values: EngineHost.objects.filter(stopped_at__isnull=True)
               .values_list("pk", "key_cache", "free_at", "heartbeat_at", "draining"))


def residency(host_id: int, now: datetime, wait: float) -> Residency:
    lease = timedelta(seconds=float(settings.PROVINGSITE["LEASE_SECONDS"]))
    held: dict[int, dict[str, Tier]] = {}
    for other, circuit_id in _HELD.rows((), ()):
        held.setdefault(other, {})[circuit_id] = Tier.HOT  # claimed: its key is loaded or loading there
    mine: dict[str, Tier] = {}
    kept: set[str] = set()
    for pk, key_cache, free_at, heartbeat_at, draining in _HOSTS.rows((), ()):
        keys = {**tiers_of(key_cache), **held.get(pk, {})}
        if pk == host_id:
            mine = keys
        elif (not draining and heartbeat_at is not None and heartbeat_at >= now - lease
              and free_at is not None and free_at >= now - timedelta(seconds=wait)):
            kept.update(keys)
    return Residency(mine, frozenset(kept))


def rank(candidates: list[Candidate], farm: Residency, now: datetime, wait: float) -> list[int]:
    """The partitions this host should take, best first, from ``candidates`` in claim order: a
    priority class at a time, the next only when none of this one is left for a key's holder."""
    out: list[int] = []
    soon = now + timedelta(seconds=wait)
    for priority in sorted({c.priority for c in candidates}):
        level = [c for c in candidates if c.priority == priority]
        urgent = [c for c in level if c.latest_start_at is not None and c.latest_start_at <= soon]
        rest = [c for c in level if c not in urgent]
        takeable = [c for c in rest if farm.tier(c.key) < Tier.COLD or c.key not in farm.kept]
        out += [c.pk for c in urgent] + [c.pk for c in by_residency(takeable, farm, wait)]
        if len(takeable) < len(rest):  # some wait for their key's holder: nothing of a lower priority first
            break
    return out


def by_residency(takeable: list[Candidate], farm: Residency, wait: float) -> list[Candidate]:
    """Hot keys' partitions first, then warm, then cold, each in claim order; but a partition
    jumps the first in line only if its job came at most the wait after that one's: a steady
    stream of one resident key's jobs never starves an older job of another key."""
    if not takeable:
        return []
    horizon = takeable[0].submitted_at + timedelta(seconds=wait)
    near = [c for c in takeable if c.submitted_at <= horizon]
    return sorted(near, key=lambda c: farm.tier(c.key)) + [c for c in takeable if c.submitted_at > horizon]


_FIELDS = ("pk", "job__kind", "job__circuit_id", "job__priority", "job__latest_start_at", "job__submitted_at")
# The head of the claim order for a host refusing the circuits ``shape`` names.
_WINDOW = Bound(lambda shape, values: claim_order(cast(tuple[str, ...], shape)).values_list(*_FIELDS)[:WINDOW])
_PARTITION_COLUMNS = tuple(f.attname for f in Partition._meta.concrete_fields)
_JOB_COLUMNS = tuple(f.attname for f in ProofJob._meta.concrete_fields)
# A chosen partition locked, still unclaimed, with its job's row.
_TAKE = Bound(lambda shape, values: Partition.objects
              .filter(pk=values[0], state=PartitionState.PENDING, host__isnull=True, job__state__in=sorted(JOB_ACTIVE))
              .select_for_update(skip_locked=True, of=("self",))
              .values_list(*_PARTITION_COLUMNS, *(f"job__{name}" for name in _JOB_COLUMNS)))


def _candidates(rows: Iterable[tuple[Any, ...]]) -> list[Candidate]:
    return [Candidate(pk, shared_key(kind, circuit_id), priority, latest, submitted)
            for pk, kind, circuit_id, priority, latest, submitted in rows]


def candidates(refused: tuple[str, ...], farm: Residency) -> list[Candidate]:
    """The head of the claim order, and the first partition of this host's hot and warm keys in
    the head's priority class where that lies beyond the window (one query per tier)."""
    window = _candidates(_WINDOW.rows(refused, ()))
    if not window:
        return window
    priority = window[0].priority
    seen = {c.key for c in window if c.priority == priority}
    for tier in (Tier.HOT, Tier.WARM):
        missing = [k for k, t in farm.mine.items() if t == tier and k not in seen]
        if missing:
            beyond = claim_order(refused).filter(job__priority=priority, job__circuit_id__in=missing)
            window += [c for c in _candidates(beyond.values_list(*_FIELDS)[:1]) if c.pk not in {w.pk for w in window}]
    return window


def taken(pk: int) -> Partition | None:
    """Partition ``pk`` locked with its job's row, if no one holds or has claimed it meanwhile."""
    rows = _TAKE.rows((), (pk,))
    if not rows:
        return None
    n = len(_PARTITION_COLUMNS)
    row = Partition.from_db(DEFAULT_DB_ALIAS, list(_PARTITION_COLUMNS), rows[0][:n])
    row.job = ProofJob.from_db(DEFAULT_DB_ALIAS, list(_JOB_COLUMNS), rows[0][n:])
    return row


def placed(host_id: int, refused: Collection[str], limit: int, now: datetime) -> list[Partition]:
    """Up to ``limit`` partitions for the host, none of a circuit in ``refused``, locked, best
    placed first; call inside the claim's transaction."""
    wait = wait_seconds()
    farm = residency(host_id, now, wait)
    rows: list[Partition] = []
    for pk in rank(candidates(tuple(sorted(refused)), farm), farm, now, wait):
        row = taken(pk)
        if row is not None:
            rows.append(row)
            if len(rows) >= limit:
                break
    return rows
