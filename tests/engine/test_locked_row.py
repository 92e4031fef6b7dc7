"""The writer's compiled read of a partition under its lock is the ORM's own read of it: every
column, its JSON and its moments converted alike, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from engine.ledger.locked import lock_job_of, locked_partition, write_columns
from engine.models import EngineHost, Partition, ProofJob

pytestmark = pytest.mark.django_db


def columns(row: Partition) -> dict[str, object]:
    return {f.attname: getattr(row, f.attname) for f in Partition._meta.concrete_fields}


def test_a_locked_read_is_the_orm_s_read_column_for_column(make_job: Callable[..., ProofJob]) -> None:
    job = make_job(partitions=3)
    now = timezone.now()
    Partition.objects.filter(job=job, index=1).update(
        state="done", attempt=2, synth_started_at=now - timedelta(seconds=2), finished_at=now,
        errors=[{"attempt": 1, "reason": "a GPU fell off the bus"}], proof={"pi_a": ["1", "2", "1"]},
        public_inputs=["7", "8"], reserved_bytes=12 * 2**30)
    for part in Partition.objects.filter(job=job):
        with transaction.atomic():
            assert columns(locked_partition(part.pk)) == columns(Partition.objects.get(pk=part.pk))


def test_a_missing_partition_is_the_orm_s_missing_row() -> None:
    with transaction.atomic(), pytest.raises(Partition.DoesNotExist):
        locked_partition(10**9)


@pytest.mark.django_db(transaction=True)  # no test transaction around it
def test_outside_a_transaction_it_refuses_rather_than_lock_nothing(make_job: Callable[..., ProofJob]) -> None:
    part = Partition.objects.filter(job=make_job()).get()
    with pytest.raises(RuntimeError, match="outside a transaction"):
        locked_partition(part.pk)


@pytest.mark.django_db(transaction=True)
def test_locking_a_partitions_job_locks_the_job_and_not_the_partition(make_job: Callable[..., ProofJob]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's write transaction holds the whole database: which rows are locked is PostgreSQL's question")
    part = Partition.objects.filter(job=make_job()).get()
    other = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        with transaction.atomic():
            lock_job_of(part.pk)
            assert other.execute("SELECT id FROM engine_partition WHERE id = %s FOR UPDATE NOWAIT",
                                 [part.pk]).fetchall() == [(part.pk,)]
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT id FROM engine_proofjob WHERE id = %s FOR UPDATE NOWAIT", [part.job_id])
    finally:
        other.close()


def test_writing_changed_columns_stores_what_the_orm_s_save_stores(make_job: Callable[..., ProofJob],
                                                                    make_writer: Callable[[str], object]) -> None:
    make_writer("host-a")
    host = EngineHost.objects.get(name="host-a")
    ours, theirs = Partition.objects.filter(job=make_job(partitions=2)).order_by("index")
    now = timezone.now()
    changes = {"state": "finalizing", "host_id": host.pk, "gpu_finished_at": now, "lease_expires_at": None,
               "errors": [{"attempt": 1, "reason": "out of memory", "at": now.isoformat()}],
               "proof": {"pi_a": ["1", "2"], "protocol": "groth16"}, "reserved_bytes": 5 * 2**40, "error": "out of memory", "batch": "b-7"}
    for row in (ours, theirs):
        for name, value in changes.items():
            setattr(row, name, value)
    with transaction.atomic():
        write_columns(ours, list(changes))
    theirs.save(update_fields=list(changes))
    stored = {row.index: columns(row) for row in Partition.objects.filter(pk__in=[ours.pk, theirs.pk])}
    assert {k: v for k, v in stored[0].items() if k in changes} == {k: v for k, v in stored[1].items() if k in changes}
