"""Placement's compiled reads (compiled once, run by every claim) are the ORM's own queries:
the same rows, in the same order, with every column converted alike, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from engine.ledger import placement
from engine.ledger.bound import Bound
from engine.ledger.order import claim_order
from engine.models import EngineHost, Partition, ProofJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def farm(make_job: Callable[..., ProofJob]) -> list[ProofJob]:
    """Jobs of two circuits and priorities, some partitions held by two hosts."""
    jobs = [make_job("porep-c2", partitions=3), make_job("winning-post", partitions=2, priority=0),
            make_job("porep-c2", partitions=2, priority=1)]
    ProofJob.objects.filter(pk=jobs[0].pk).update(inputs={"n": 1, "nested": [1, "two"]},
                                                   latest_start_at=timezone.now())
    for name, index in (("host-a", 0), ("host-b", 1)):
        host = EngineHost.objects.create(name=name, key_cache=[{"circuit_id": "porep-c2/tiny", "tier": "warm"}],
                                         free_at=timezone.now(), heartbeat_at=timezone.now())
        Partition.objects.filter(job=jobs[0], index=index).update(state="synthesizing", host=host)
    return jobs


def test_the_residency_reads_are_the_orm_s(farm: list[ProofJob]) -> None:
    held = (Partition.objects.filter(state__in=placement.PARTITION_LIVE, host__isnull=False)
            .values_list("host_id", "job__circuit_id").distinct())
    assert sorted(placement._HELD.rows((), ())) == sorted(held)
    hosts = EngineHost.objects.filter(stopped_at__isnull=True).values_list("pk", "key_cache", "free_at",
                                                                           "heartbeat_at", "draining")
    assert sorted(placement._HOSTS.rows((), ())) == sorted(hosts)


@pytest.mark.parametrize("refused", [(), ("winning-post/tiny",), ("porep-c2/tiny", "winning-post/tiny")])
def test_the_window_is_the_head_of_the_claim_order(farm: list[ProofJob], refused: tuple[str, ...]) -> None:
    expected = list(claim_order(refused).values_list(*placement._FIELDS)[:placement.WINDOW])
    assert placement._WINDOW.rows(refused, ()) == expected


def test_a_taken_partition_and_its_job_are_the_orm_s_rows(farm: list[ProofJob]) -> None:
    for part in Partition.objects.filter(state="pending"):
        with transaction.atomic():
            taken = placement.taken(part.pk)
        assert taken is not None
        expected = Partition.objects.select_related("job").get(pk=part.pk)
        for model, got, want in ((Partition, taken, expected), (ProofJob, taken.job, expected.job)):
            assert {f.attname: getattr(got, f.attname) for f in model._meta.concrete_fields} == \
                {f.attname: getattr(want, f.attname) for f in model._meta.concrete_fields}


def test_a_claimed_partition_is_not_taken_again(farm: list[ProofJob]) -> None:
    held = Partition.objects.filter(state="synthesizing").first()
    assert held is not None
    with transaction.atomic():
        assert placement.taken(held.pk) is None


def test_a_compiled_distinct_read_gives_the_columns_asked_for_not_its_ordering_s(farm: list[ProofJob]) -> None:
    def hosts() -> QuerySet[Partition, tuple[int]]:  # the model's ordering adds its columns to a DISTINCT's SELECT
        return Partition.objects.filter(host__isnull=False).values_list("host_id").distinct()

    assert sorted(Bound(lambda shape, values: hosts()).rows((), ())) == sorted(hosts())
