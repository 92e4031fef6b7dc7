"""Querysets compiled to SQL once, run many times, their rows converted in one tight loop.

A busy console re-reads its hot fragments up to ten times a second, and ``/status`` is polled
as often; each is a dozen small queries. Profiled against the bench's farm (bench/status.py),
Django's SQL compiler took about 0.4 ms per query while SQLite ran each in about 0.02 ms, and
converting a thousand partition rows (four timestamps each) through the ORM's generic
converters cost more than running their query. A Prepared query keeps the compiler, its SQL
and its parameters per database connection and per argument tuple, and on each call only
executes and converts. On SQLite a timestamp column is converted by one ``replace`` of the
naive datetime the sqlite3 module already parsed (what Django's converter ends in, without
its checks); every other column gets exactly the ORM's converters.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial, reduce
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

from engine.status.read import snapshot_memo

# Compilations kept per query: arguments that move with the clock (a window's start) are
# rounded by the caller, so a handful of entries covers every live combination.
MAX_ENTRIES = 16

Convert = Callable[[Any], Any]


def _timestamp_converter(connection: Any) -> Convert | None:
    """SQLite's timestamps arrive as naive datetimes in the connection's zone (the sqlite3
    module parses the declared ``datetime`` columns); Django's converter only attaches that
    zone. None where the backend needs no such step or the column is not a plain one."""
    if connection.vendor != "sqlite" or not settings.USE_TZ:
        return None
    zone = connection.timezone

    def convert(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):  # a computed column: the text SQLite stores
            from django.utils.dateparse import parse_datetime

            value = parse_datetime(value)
        return value.replace(tzinfo=zone) if value.tzinfo is None else value
    return convert


def _orm_converter(converters: list[Any], expression: Any, connection: Any) -> Convert:
    def convert(value: Any) -> Any:
        return reduce(lambda v, conv: conv(v, expression, connection), converters, value)
    return convert


class _Compiled:
    __slots__ = ("sql", "params", "columns", "width")

    def __init__(self, queryset: QuerySet[Any, Any], connection: Any) -> None:
        compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        self.sql, self.params = sql, tuple(params)
        fields = [s[0] for s in compiler.select[0:compiler.col_count]]
        fast = _timestamp_converter(connection)
        columns: list[tuple[int, Convert]] = []
        timestamp = getattr(type(connection.ops), "convert_datetimefield_value", None)
        for pos, (converters, expression) in compiler.get_converters(fields).items():
            only_timestamp = all(getattr(c, "__func__", None) is timestamp for c in converters)
            if fast is not None and only_timestamp and expression.output_field.get_internal_type() == "DateTimeField":
                columns.append((pos, fast))
            else:
                columns.append((pos, _orm_converter(converters, expression, connection)))
        self.columns = tuple(columns)
        # Columns the SQL needs beyond the asked ones (ordering under DISTINCT) are cut off.
        self.width = compiler.col_count if compiler.has_extra_select else None

    def convert(self, fetched: list[tuple[Any, ...]], make: Callable[[Any], tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows converted as the ORM would, each made by ``make`` (its named row's ``_make``)."""
        if self.width is not None:
            fetched = [row[:self.width] for row in fetched]
        if not self.columns:
            return fetched if make is tuple else [make(row) for row in fetched]
        out = []
        for row in fetched:
            values = list(row)
            for pos, convert in self.columns:
                values[pos] = convert(values[pos])
            out.append(make(values))
        return out


class Prepared[Row: tuple[Any, ...]]:
    """`make(*args)` builds a values_list() queryset; rows(*args) returns its rows, each a
    ``row`` (a NamedTuple whose fields are the queryset's columns in order), or a plain tuple
    without one. Inside one of ``one_snapshot()``'s own snapshots the same query is run once
    (callers must not change the rows they get)."""

    def __init__(self, make: Callable[..., QuerySet[Any, Any]], row: type[Row] | None = None) -> None:
        self.make = make
        # tuple.__new__ with the row's class: a named row for the price of a tuple (its _make
        # checks the length too, which the query's own columns make certain)
        self._make_row: Callable[[Any], tuple[Any, ...]] = partial(tuple.__new__, row) if row is not None else tuple
        self._compiled: dict[tuple[int, tuple[Hashable, ...]], tuple[Any, _Compiled]] = {}

    def rows(self, *args: Hashable) -> list[Row]:
        # Connections are per thread; the key holds the wrapper's id, and the entry holds the
        # wrapper itself, so an id is never reused while its entry lives.
        connection = connections[DEFAULT_DB_ALIAS]
        key = (id(connection), args)
        entry = self._compiled.get(key)
        if entry is None:
            if len(self._compiled) >= MAX_ENTRIES:
                self._compiled.clear()
            entry = self._compiled[key] = (connection, _Compiled(self.make(*args), connection))
        memo = snapshot_memo(connection)
        if memo is not None and (self, args) in memo:
            return cast(list[Row], memo[self, args])  # stored below, by this query for these args
        compiled = entry[1]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, compiled.params)
            fetched = cursor.fetchall()
        rows = cast(list[Row], compiled.convert(fetched, self._make_row))  # converted as the ORM would
        if memo is not None:
            memo[self, args] = rows
        return rows

    def value(self, *args: Hashable, default: Any = None) -> Any:
        """The first column of the first row."""
        rows = self.rows(*args)
        return rows[0][0] if rows else default
