"""An engine host's own rows: the host as it starts, its workers, and an operator's removal of
a stopped host. The host's later writes (heartbeat, key list, drain, stop) go through its
StatusWriter; this module writes what exists before that writer does.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from engine.ledger.clock import host_clock, next_stamp
from engine.ledger.hints import publish_hint
from engine.models import EngineHost, Worker
from engine.states import PARTITION_TERMINAL, PartitionState


class HostInUse(Exception):
    """A host still running, or still named by claimed work, is not the operator's to remove."""


def register_host(name: str, *, backend: str, memory_budget_bytes: int, memory_total_bytes: int,
                  synthesis_max: int, cost_per_hour: float | None = None) -> EngineHost:
    """The host's row as this run starts it: alive now, holding no keys and refusing none yet.
    A start is a change every reader shows (a new card, its workers): it takes a version of
    the host's own clock. A cost per hour given here (PROVINGSITE_HOST_COST_PER_HOUR) replaces
    the recorded one; without one, what an operator set in the admin stays."""
    host, _ = EngineHost.objects.get_or_create(name=name)
    clock = host_clock(name)
    now = timezone.now()
    with transaction.atomic():
        stamp = next_stamp(clock)
        EngineHost.objects.filter(pk=host.pk).update(
            backend=backend, started_at=now, heartbeat_at=now, stopped_at=None,
            memory_budget_bytes=memory_budget_bytes, memory_total_bytes=memory_total_bytes,
            synthesis_max=synthesis_max, key_cache=[], refused_keys={}, reserved_by_engine={}, device_reserved={},
            **({"cost_per_hour": cost_per_hour} if cost_per_hour is not None else {}), **stamp.fields())
    publish_hint(host=name, version=stamp.version)
    host.refresh_from_db()
    return host


def set_cost_per_hour(host: EngineHost, cost_per_hour: float | None) -> None:
    """An operator's cost per hour for ``host`` (the admin), for the cost per proof from now on.
    Not a transition: no reader's figure moves until a range is read again, so no version."""
    if cost_per_hour is not None and cost_per_hour < 0:
        raise ValueError("a cost per hour is not negative")
    EngineHost.objects.filter(pk=host.pk).update(cost_per_hour=cost_per_hour)


def worker_rows(host: EngineHost, devices: list[str], per_device: int,
                extra: dict[str, int] | None = None) -> list[Worker]:
    """One row per worker slot this run starts, ``per_device`` on each device, and ``extra``'s
    count on each of its devices (a GPU host's CPU lane for small circuits)."""
    rows = []
    slots = [(device, per_device) for device in devices] + list((extra or {}).items())
    for device, count in slots:
        for ordinal in range(count):
            row, _ = Worker.objects.get_or_create(host=host, device=device, ordinal=ordinal)
            rows.append(row)
    # Slots from an earlier run with more workers are removed, so the console shows what runs.
    # One still named by a partition in gpu stays until the rescue requeues that partition:
    # the database refuses a gpu partition without a worker.
    (Worker.objects.filter(host=host).exclude(pk__in=[r.pk for r in rows])
     .exclude(partitions__state=PartitionState.GPU).delete())
    return rows


def remove_stopped(hosts: QuerySet[EngineHost]) -> int:
    """Delete hosts that stopped and hold no claimed work (the admin's delete); HostInUse names
    the first that does not qualify, and then none is deleted."""
    with transaction.atomic():
        for host in hosts.select_for_update():
            if host.stopped_at is None:
                raise HostInUse(f"{host.name} has not stopped: stop its engine first")
            if host.partitions.exclude(state__in=PARTITION_TERMINAL).exists():
                raise HostInUse(f"{host.name} still holds claimed partitions")
        count, _ = hosts.delete()
    return count
