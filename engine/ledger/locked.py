"""Rows read under their locks by a key, the SQL compiled once per thread (engine.ledger.bound):
every transition of every partition starts here (engine.ledger.writer), and each statement
differs between calls only in the key."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections

from engine.ledger.bound import Bound
from engine.models import Partition, ProofJob

_COLUMNS = tuple(f.attname for f in Partition._meta.concrete_fields)
_LOCKED = Bound(lambda shape, values: Partition.objects.select_for_update().filter(pk=values[0])
                .values_list(*_COLUMNS))
# The job's row alone (of: PostgreSQL locks no partition with it).
_JOB_OF = Bound(lambda shape, values: ProofJob.objects.select_for_update(of=("self",))
                .filter(partitions__pk=values[0]).values_list("pk"))


def locked_partition(pk: int) -> Partition:
    """The partition's row, locked until the transaction ends (PostgreSQL; SQLite's write
    transaction holds the database); Partition.DoesNotExist where there is none."""
    if not connections[DEFAULT_DB_ALIAS].in_atomic_block:
        raise RuntimeError("locked_partition() outside a transaction locks nothing")
    rows = _LOCKED.rows((), (pk,))
    if not rows:
        raise Partition.DoesNotExist(f"no partition {pk}")
    return Partition.from_db(DEFAULT_DB_ALIAS, list(_COLUMNS), rows[0])




def lock_job_of(partition_pk: int) -> None:
    """Lock the job of partition ``partition_pk`` until the transaction ends."""
    if not connections[DEFAULT_DB_ALIAS].in_atomic_block:
        raise RuntimeError("lock_job_of() outside a transaction locks nothing")
    _JOB_OF.rows((), (partition_pk,))
