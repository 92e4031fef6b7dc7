"""What moved since a reading is what the ORM's own query of the rows stamped after it finds,
for every reading a pass could hold: each clock's value bound in its place, a clock the reading
did not know yet counted in full."""

from __future__ import annotations

import pytest
from django.db import transaction

from engine.ledger.clock import Reading, host_clock, next_stamp, written_after
from engine.models import WEB_CLOCK, EngineHost, Partition, ProofJob
from engine.status.changes import Changes, changed_since
from engine.status.records import clocks
from tests.console.conftest import SNAP_ID, Farm

pytestmark = pytest.mark.django_db


def by_the_orm(since: Reading) -> Changes:
    newer = written_after(since)
    return Changes(jobs=set(ProofJob.objects.filter(newer).values_list("job_id", flat=True)),
                   partitions_of=set(Partition.objects.filter(newer).values_list("job__job_id", flat=True)),
                   hosts=EngineHost.objects.filter(newer).exists())


def stamp_partition(clock: int, index: int) -> None:
    with transaction.atomic():
        Partition.objects.filter(job__job_id=SNAP_ID, index=index).update(**next_stamp(clock).fields())


def stamp_host(clock: int, farm: Farm) -> None:
    with transaction.atomic():
        EngineHost.objects.filter(pk=farm.host.pk).update(**next_stamp(clock).fields())


def test_every_reading_along_two_writers_sees_what_the_orm_sees(farm: Farm) -> None:
    readings = [Reading({}), clocks()]  # no clock; the web's only (the host's is made next)
    host = host_clock(farm.host.name)
    for write in [lambda: stamp_partition(host, 5), lambda: stamp_host(host, farm),
                  lambda: stamp_partition(WEB_CLOCK, 6), lambda: stamp_partition(host, 7)]:
        write()
        readings.append(clocks())
    assert len({len(r.values) for r in readings}) == 3  # no clock, one, both
    for since in readings:
        assert changed_since(since) == by_the_orm(since), since
    assert changed_since(readings[1]).hosts and not changed_since(readings[-1]).hosts
    assert changed_since(readings[-2]).partitions_of == {SNAP_ID}
