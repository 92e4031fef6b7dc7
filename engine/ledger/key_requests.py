"""Operators' key control: preload a circuit's proving key to a tier, or demote it, on a host or
on every live host (issue 32).

The web side (the API, the console's key chips, ``manage.py keys``) calls ``ask``, which judges
the request from the records (a known circuit, a live host, a tier that fits the action, and,
for a preload, the host's free budget: its budget less its keys' and its claimed partitions'
bytes) and writes one KeyRequest row per host, waking each host's key control when it commits
(engine.ledger.new_work). Each engine carries out its own pending rows then, or at its next
heartbeat if the wake was lost (engine.pipeline.key_control), re-checking the fit against its
own memory manager, and records the outcome with ``finish``. A host that stops first finishes its pending
rows ``failed`` in the transaction that records it stopped (``fail_pending_of_stopped``), so no
request waits for ever on a host that will not carry it out.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from engine.format import fmt_bytes
from engine.ledger.circuits import REGISTERED_ID
from engine.ledger.new_work import announce_key_requests
from engine.models import Circuit, EngineHost, KeyRequest, Partition
from engine.states import PARTITION_HOLDING

TIERS = {KeyRequest.Action.PRELOAD: ("hot", "warm"), KeyRequest.Action.EVICT: ("warm", "cold")}


class KeyRequestInvalid(Exception):
    """A request naming an unknown circuit (``status`` 404) or a bad field (400)."""

    def __init__(self, status: int, field: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.field, self.detail = status, field, detail


class DoesNotFit(Exception):
    """A preload the host's free budget cannot hold (409)."""

    def __init__(self, host: str, free_bytes: int, needed_bytes: int) -> None:
        super().__init__(host, free_bytes, needed_bytes)
        self.host, self.free_bytes, self.needed_bytes = host, free_bytes, needed_bytes

    def __str__(self) -> str:
        return (f"{self.host} has {fmt_bytes(self.free_bytes)} ({self.free_bytes} bytes) of its memory budget free; "
                f"the key needs {fmt_bytes(self.needed_bytes)} ({self.needed_bytes} bytes)")


def key_bytes(circuit_id: str) -> int:
    """What a circuit's key needs in memory, hot: the most any host has recorded it holding,
    else the circuit's estimate (built-in kinds: their sizing with fixed-base tables; a
    registered circuit: its zkey's size, which its points and coefficients are)."""
    recorded = [int(e.get("bytes") or 0) for column in EngineHost.objects.exclude(key_cache=[])
                .values_list("key_cache", flat=True) for e in column or []
                if isinstance(e, dict) and e.get("circuit_id") == circuit_id and e.get("tier", "hot") == "hot"]
    if recorded:
        return max(recorded)
    found = REGISTERED_ID.match(circuit_id)
    if found is not None:
        row = Circuit.objects.filter(pk=found.group(1)).first()
        if row is None:
            raise KeyRequestInvalid(404, "circuit", f"no circuit {circuit_id!r} is registered")
        return int(row.zkey_bytes)
    from engine.circuits.kinds import InputError, parse_circuit_id

    try:
        needs = parse_circuit_id(circuit_id).memory
    except InputError:
        raise KeyRequestInvalid(404, "circuit", f"no circuit {circuit_id!r}: expected <kind>/<scale> of a built-in "
                                "kind or circom/<sha256> of a registered circuit") from None
    tables = needs.table_bytes if settings.PROVINGSITE["FIXED_BASE"] else 0
    return int(needs.key_bytes + tables)


def free_bytes(host: EngineHost, circuit_id: str) -> int:
    """The host's budget less what its records say it holds (its keys, its claimed partitions'
    reservations); what ``circuit_id``'s own key already holds counts as free for it."""
    keys = sum(int(e.get("bytes") or 0) for e in host.key_cache or []
               if isinstance(e, dict) and e.get("circuit_id") != circuit_id)
    claimed = Partition.objects.filter(host=host, state__in=PARTITION_HOLDING).aggregate(n=Sum("reserved_bytes"))["n"]
    return int(host.memory_budget_bytes) - keys - int(claimed or 0)


STOPPED_BEFORE = "host stopped before carrying it out"


def _hosts(name: str | None) -> list[EngineHost]:
    # Locked until the requests are written: a host stopping meanwhile either waits and then
    # fails them with its other pending rows, or stops first and is not live here.
    live = EngineHost.objects.select_for_update().filter(stopped_at__isnull=True).order_by("name")
    if name is None or name == "":
        hosts = list(live)
        if not hosts:
            raise KeyRequestInvalid(400, "host", "no engine host is running")
        return hosts
    host = live.filter(name=name).first()
    if host is None:
        raise KeyRequestInvalid(400, "host", f"no running engine host is named {name!r}")
    return [host]


def ask(circuit_id: str, action: str, tier: str, host: str | None = None, requested_by: str = "") -> list[KeyRequest]:
    """One pending KeyRequest per host named (every live host when None). Raises
    KeyRequestInvalid for an unknown circuit, action, tier or host, DoesNotFit for a preload
    some host's free budget cannot hold (then no row is written)."""
    if action not in TIERS:
        raise KeyRequestInvalid(400, "action", f"expected preload or evict, got {action!r}")
    if tier not in TIERS[KeyRequest.Action(action)]:
        raise KeyRequestInvalid(400, "tier", f"{action} is to {' or '.join(TIERS[KeyRequest.Action(action)])}, "
                                f"got {tier!r}")
    needed = key_bytes(circuit_id)
    with transaction.atomic():
        hosts = _hosts(host)
        if action == KeyRequest.Action.PRELOAD:
            for h in hosts:
                free = free_bytes(h, circuit_id)
                if needed > free:
                    raise DoesNotFit(h.name, max(free, 0), needed)
        rows = [KeyRequest.objects.create(circuit_id=circuit_id, host=h, action=action, tier=tier,
                                          needed_bytes=needed, requested_by=requested_by) for h in hosts]
        announce_key_requests(h.pk for h in hosts)
        return rows


def pending_for(host_id: int) -> list[KeyRequest]:
    return list(KeyRequest.objects.filter(host_id=host_id, state=KeyRequest.State.PENDING).order_by("id"))


def finish(request: KeyRequest, state: str, reason: str = "") -> None:
    KeyRequest.objects.filter(pk=request.pk, state=KeyRequest.State.PENDING).update(
        state=state, reason=reason, finished_at=timezone.now())


def fail_pending_of_stopped(host_id: int) -> int:
    """Inside the transaction that records the host stopped: its pending requests will never be
    carried out, so they end ``failed`` now; returns how many."""
    return KeyRequest.objects.filter(host_id=host_id, state=KeyRequest.State.PENDING).update(
        state=KeyRequest.State.FAILED, reason=STOPPED_BEFORE, finished_at=timezone.now())
