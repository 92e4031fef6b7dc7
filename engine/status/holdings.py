"""What each host holds, derived from the records of one snapshot: memory by owner, keys and
who uses them, and how many of its partitions wait in each claimed state.

None of it is a counter an engine writes beside its transitions. A partition's reservation is
its ``reserved_bytes``, written in the transaction that records it ``synthesizing``, and it
counts while the partition is in a holding state (engine.states.PARTITION_HOLDING); a key's
bytes are in the host's key list, written when a key is loaded or evicted; a key is in use
exactly while a claimed partition of its circuit is on that host. So the memory panel, the key
chips and the cells read the same rows and cannot disagree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.states import PARTITION_HOLDING, PartitionState
from engine.status.host_report import keys_of
from engine.status.records import ClaimedRow, HostRow

P = PartitionState

KEY_OWNER_PREFIX = "key:"


def partition_owner(kind: str, job_id: str) -> str:
    """A partition's reservation owner: the engine's memory manager and the readers use this name."""
    return f"{kind} {job_id}"


def key_owner(circuit_id: str) -> str:
    return f"{KEY_OWNER_PREFIX}{circuit_id}"


# Reservations no partition's transition records: the engine writes them to its host row when
# one changes (EngineHost.reserved_by_engine), and they are read from there.
PROCESSES_OWNER = "engine processes"
# The handover blocks the engine keeps between partitions (engine.pipeline.block_pool), lent or
# at rest: evictable, so not held for good.
HANDOVER_OWNER = "handover blocks"


def compiled_owner(circuit_id: str, process: int) -> str:
    """A synthesis process's compiled matrices of a circuit (process counts from 0)."""
    return f"compiled {circuit_id} in synthesis-{process + 1}"


def loading_owner(circuit_id: str) -> str:
    """What a key's load holds beside the key while it reads."""
    return f"loading {key_owner(circuit_id)}"


def engine_held(owner: str) -> bool:
    """An owner of the engine's own (see above)."""
    return owner in (PROCESSES_OWNER, HANDOVER_OWNER) or owner.startswith(("compiled ", "loading "))


def held_for_good(owner: str) -> bool:
    """An engine's own reservation that no partition's progress gives back (its processes at
    rest, a synthesis process's compiled matrices): not a key load's buffers nor the handover
    blocks (given back when memory runs short). Work that cannot fit beside these and its key
    would wait for ever."""
    return engine_held(owner) and owner != HANDOVER_OWNER and not owner.startswith("loading ")


def device_reserved(column: Any) -> list[dict[str, Any]]:
    """The host row's device_reserved (engine.pipeline.device_memory), as written or edited by
    hand, per device in name order: its budget, what is reserved and by whom (whole byte counts)."""
    if not isinstance(column, dict):
        return []
    out = []
    for device, entry in sorted(column.items()):
        if not isinstance(entry, dict):
            continue
        budget = entry.get("budget")
        owners = entry.get("by_owner")
        by_owner = {str(owner): n for owner, n in (owners.items() if isinstance(owners, dict) else ())
                    if isinstance(n, int) and not isinstance(n, bool) and n > 0}
        out.append({"device": str(device),
                    "budget_bytes": budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
                    "reserved_bytes": sum(by_owner.values()), "by_owner": by_owner})
    return out


def holder_of(owner: str) -> str:
    """Who a memory owner is: "key", "engine" (its processes, compiled matrices, a load's
    buffers, its handover blocks) or "job" (a claimed partition's reservation)."""
    if owner.startswith(KEY_OWNER_PREFIX):
        return "key"
    return "engine" if engine_held(owner) else "job"


def engine_reserved(column: Any) -> dict[str, int]:
    """The host row's reserved_by_engine, as written or edited by hand: whole byte counts only."""
    if not isinstance(column, dict):
        return {}
    return {str(owner): int(n) for owner, n in column.items()
            if engine_held(str(owner)) and isinstance(n, int) and not isinstance(n, bool) and n > 0}


@dataclass(frozen=True)
class HeldKey:
    circuit_id: str
    bytes: int
    users: int  # claimed partitions of this key's circuit on the host, in this snapshot
    loaded_at: datetime | None = None
    tier: str = "hot"  # hot or warm, as the engine recorded it (engine.status.host_report.KeyReport)
    last_used_at: datetime | None = None
    load_seconds: float | None = None
    mapped_bytes: int = 0

    @property
    def evictable(self) -> bool:
        return self.users == 0


@dataclass(frozen=True)
class Holdings:
    budget: int
    physical: int
    by_owner: dict[str, int] = field(default_factory=dict)
    keys: tuple[HeldKey, ...] = ()
    # The host's claimed partitions by state (reserving, synthesizing, synth_done, gpu, finalizing).
    claimed: dict[str, int] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return sum(self.by_owner.values())

    def count(self, state: str) -> int:
        return self.claimed.get(state, 0)


def _users(claimed_by_key: dict[str, int], circuit_id: str) -> int:
    """A built-in job names no circuit: its host proves it at the host's one scale, so the
    kind names the key there ("porep-c2" for "porep-c2/tiny")."""
    short = circuit_id.split("/", 1)[0]
    return claimed_by_key.get(circuit_id, 0) + (claimed_by_key.get(short, 0) if short != circuit_id else 0)


def holdings(hosts: Iterable[HostRow], claimed: Iterable[ClaimedRow]) -> dict[int, Holdings]:
    """Every host's holdings, from this snapshot's host rows and claimed partitions
    (engine.status.records.CLAIMED)."""
    owners: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    states: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_key: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in claimed:
        states[row.host][row.state] += row.n
        by_key[row.host][row.circuit_id or row.kind] += row.n
        if row.state in PARTITION_HOLDING:
            owners[row.host][partition_owner(row.kind, row.job_id)] += int(row.reserved or 0)
    result = {}
    for host in hosts:
        keys = tuple(HeldKey(k.circuit_id, k.bytes, _users(by_key[host.pk], k.circuit_id), k.loaded_at, k.tier,
                             k.last_used_at, k.load_seconds, k.mapped_bytes)
                     for k in keys_of(host.key_cache))
        by_owner = dict(owners.get(host.pk, {}))
        by_owner.update({key_owner(k.circuit_id): k.bytes for k in keys})
        by_owner.update(engine_reserved(host.reserved_by_engine))
        result[host.pk] = Holdings(budget=host.memory_budget_bytes or 0, physical=host.memory_total_bytes or 0,
                                   by_owner=by_owner, keys=keys, claimed=dict(states.get(host.pk, {})))
    return result


def key_sizes(hosts: Iterable[HostRow]) -> dict[str, int]:
    """Each proving key's size as the key chips show it, by circuit: the most bytes a host
    holds it with hot (in its memory budget), else warm (what it charges plus its mapped image,
    read on demand). The capacity page models a circuit's key with the same figure."""
    hot: dict[str, int] = {}
    warm: dict[str, int] = {}
    for host in hosts:
        for key in keys_of(host.key_cache):
            if key.tier == "hot":
                hot[key.circuit_id] = max(hot.get(key.circuit_id, 0), key.bytes)
            elif key.tier == "warm":
                warm[key.circuit_id] = max(warm.get(key.circuit_id, 0), key.bytes + key.mapped_bytes)
    return {**warm, **hot}
