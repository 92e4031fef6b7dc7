"""Rows read under their locks by a key, the SQL compiled once per thread (engine.ledger.bound),
and a partition's changed columns written back: every transition of every partition starts and
ends here (engine.ledger.writer), and each statement differs between calls only in its values."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections

from engine.ledger.bound import Bound
from engine.models import Partition, ProofJob

_COLUMNS = tuple(f.attname for f in Partition._meta.concrete_fields)
_FIELDS = {f.attname: f for f in Partition._meta.concrete_fields if not f.primary_key}
_KEY = str(Partition._meta.pk.column) if Partition._meta.pk is not None else "id"
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


def write_columns(row: Partition, attnames: list[str]) -> None:
    """Row ``row``'s columns ``attnames`` written back, as ``row.save(update_fields=…)`` writes
    them (each value prepared by its field), without compiling the save's UPDATE each time:
    Partition has no signal receivers and no automatic columns for save() to run."""
    if not attnames:
        return
    connection = connections[DEFAULT_DB_ALIAS]
    q = connection.ops.quote_name
    fields = [_FIELDS[name] for name in attnames]
    sets = ", ".join(f"{q(str(f.column))} = %s" for f in fields)
    values = [f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {q(Partition._meta.db_table)} SET {sets} WHERE {q(_KEY)} = %s",
                       [*values, row.pk])
