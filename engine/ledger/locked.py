"""A partition's row read under its lock by its key, the SQL compiled once per connection.

Every transition of every partition starts here (engine.ledger.writer). Django compiled the
same SELECT ... FOR UPDATE on each call, about a millisecond of a tiny partition's few; the
statement differs between calls only in the key, so it is compiled once with a stand-in for
the key, and each call binds the key and builds the model as the ORM would (its converters,
then ``Model.from_db``).
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from engine.models import Partition

# Never a row's key (keys count up from 1): marks where the key goes in the compiled parameters.
_STAND_IN = -(1 << 40)


class _Compiled:
    __slots__ = ("connection", "sql", "params", "slot", "names", "converters")

    def __init__(self, connection: Any) -> None:
        query = Partition.objects.select_for_update().filter(pk=_STAND_IN).query
        compiler = query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        self.connection = connection
        self.sql, self.params = sql, list(params)
        (self.slot,) = [n for n, p in enumerate(params) if p == _STAND_IN]
        columns = compiler.select[:compiler.col_count]
        self.names = [column[0].target.attname for column in columns]
        self.converters = [(pos, convs, expr) for pos, (convs, expr) in
                           compiler.get_converters([column[0] for column in columns]).items()]


# Per thread, as Django's connections are: a thread's entry goes with it.
_local = threading.local()


def locked_partition(pk: int) -> Partition:
    """The partition's row, locked until the transaction ends (PostgreSQL; SQLite's write
    transaction holds the database); Partition.DoesNotExist where there is none."""
    connection = connections[DEFAULT_DB_ALIAS]
    if not connection.in_atomic_block:
        raise RuntimeError("locked_partition() outside a transaction locks nothing")
    compiled: _Compiled | None = getattr(_local, "compiled", None)
    if compiled is None or compiled.connection is not connection:
        compiled = _local.compiled = _Compiled(connection)
    params = list(compiled.params)
    params[compiled.slot] = pk
    with connection.cursor() as cursor:
        cursor.execute(compiled.sql, params)
        row = cursor.fetchone()
    if row is None:
        raise Partition.DoesNotExist(f"no partition {pk}")
    values = list(row)
    for pos, converters, expression in compiled.converters:
        for convert in converters:
            values[pos] = convert(values[pos], expression, connection)
    return Partition.from_db(DEFAULT_DB_ALIAS, compiled.names, values)
