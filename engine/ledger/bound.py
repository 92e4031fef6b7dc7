"""A query compiled once per thread and shape, its integer values bound at each call.

The hot reads that differ between calls only in a few integers (a partition's key for the
writer's locked read, the clocks' values for the console's "what moved since") paid Django's
compiler, about a millisecond, on every call. ``make(shape, values)`` builds the values_list()
queryset; it is compiled with a stand-in for each value (an integer no row holds), the compiled
parameters then say which value goes where, and each call binds its values and converts the rows
with the ORM's own converters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

# Far below any key or clock value (both count up from 0); one per value, counting down.
_STAND_IN = -(1 << 40)
# Shapes kept per thread (a farm's set of clocks changes when a host joins).
MAX_SHAPES = 16


class _Compiled:
    __slots__ = ("connection", "sql", "params", "slots", "converters", "width")

    def __init__(self, queryset: QuerySet[Any, Any], n_values: int, connection: Any) -> None:
        compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        self.connection = connection
        self.sql, self.params = sql, tuple(params)
        self.slots = tuple(_STAND_IN - p if isinstance(p, int) and 0 <= _STAND_IN - p < n_values else None
                           for p in params)
        columns = [column[0] for column in compiler.select[:compiler.col_count]]
        # the columns asked for, without those a DISTINCT's ordering adds to the SELECT
        self.width = compiler.col_count if compiler.has_extra_select else None
        self.converters = [(pos, convs, expr) for pos, (convs, expr) in compiler.get_converters(columns).items()]


class Bound:
    """``make(shape, values)``, compiled once per thread and shape (see the module)."""

    def __init__(self, make: Callable[[Hashable, Sequence[int]], QuerySet[Any, Any]]) -> None:
        self.make = make
        self._local = threading.local()  # connections are per thread: so are the compilations

    def rows(self, shape: Hashable, values: Sequence[int]) -> list[tuple[Any, ...]]:
        """The rows of ``make(shape, values)``, as its values_list() gives them."""
        connection = connections[DEFAULT_DB_ALIAS]
        kept: dict[Hashable, _Compiled] = self._local.__dict__.setdefault("kept", {})
        compiled = kept.get(shape)
        if compiled is None or compiled.connection is not connection:
            if len(kept) >= MAX_SHAPES:
                kept.clear()
            stand_ins = [_STAND_IN - n for n in range(len(values))]
            compiled = kept[shape] = _Compiled(self.make(shape, stand_ins), len(values), connection)
        bound = [p if slot is None else values[slot] for p, slot in zip(compiled.params, compiled.slots, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, bound)
            fetched = cursor.fetchall()
        if compiled.width is not None:
            fetched = [row[:compiled.width] for row in fetched]
        if not compiled.converters:
            return fetched
        out = []
        for row in fetched:
            converted = list(row)
            for pos, converters, expression in compiled.converters:
                for convert in converters:
                    converted[pos] = convert(converted[pos], expression, connection)
            out.append(tuple(converted))
        return out
