"""The read-side helpers behind every reader of the farm: what one snapshot may remember, and
the collector held off while a pass runs."""

from __future__ import annotations

import gc

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine.models import EngineHost
from engine.status.read import collection_deferred, one_snapshot
from engine.status.records import host_rows


@pytest.mark.django_db(transaction=True)
def test_inside_its_own_snapshot_a_reader_runs_a_repeated_query_once() -> None:
    EngineHost.objects.create(name="gpu-a")
    with CaptureQueriesContext(connection) as queries, one_snapshot():
        first, second = host_rows(), host_rows()
    assert [h.name for h in first] == [h.name for h in second] == ["gpu-a"]
    assert sum("engine_enginehost" in q["sql"] for q in queries.captured_queries) == 1


@pytest.mark.django_db
def test_inside_a_callers_transaction_every_read_sees_the_callers_writes() -> None:
    with one_snapshot():
        assert host_rows() == []
        EngineHost.objects.create(name="gpu-b")
        assert [h.name for h in host_rows()] == ["gpu-b"]


def test_the_collector_waits_while_passes_run_and_runs_again_after_the_last() -> None:
    assert gc.isenabled()
    with collection_deferred():
        with collection_deferred():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pass_that_fails_still_lets_the_collector_run_again() -> None:
    with pytest.raises(RuntimeError), collection_deferred():
        raise RuntimeError("a failed read")
    assert gc.isenabled()
