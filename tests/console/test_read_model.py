"""The read model: one function reads the farm into frozen data, and /status, /metrics and every
console panel are projections of it that touch no database."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engine.console import reads
from engine.console.fragments import ALL, REGISTRY
from engine.status.farm import farm_document
from engine.status.read_model import Farm as ReadFarm
from engine.status.read_model import live_farm
from tests.console.conftest import SNAP_ID, Farm, move

pytestmark = pytest.mark.django_db


def read_now() -> ReadFarm:
    with live_farm(whole=True) as state:
        return state


def test_the_farm_is_read_once_and_then_cannot_change(farm: Farm) -> None:
    state = read_now()
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.jobs = ()
    move(SNAP_ID, 3, "synthesizing", synth_started_at=timezone.now())
    # What was read stays what was read: a projection of it now says what it said then.
    assert farm_document(state)["hosts"][0]["synthesis"]["active"] == state.held[farm.host.pk].count("synthesizing")
    assert read_now().version == state.version + 1


def test_status_and_every_console_panel_are_projections_that_read_no_database(farm: Farm) -> None:
    state = read_now()
    with CaptureQueriesContext(connection) as queries:
        document = farm_document(state)
        contexts = {name: REGISTRY[name].read(state, None, {}) for name in sorted(ALL)}
    assert [q["sql"] for q in queries.captured_queries] == []
    assert document["version"] == state.version and set(contexts) == ALL


def test_the_panels_and_status_project_one_farm_to_the_same_figures(farm: Farm) -> None:
    state = read_now()
    document = farm_document(state)
    synthesis = reads.synthesis_reasons_context(state)
    counters = reads.counters_context(state)
    memory = reads.memory_context(state)
    assert synthesis["active"] == document["synthesis"]["active"]
    assert synthesis["pending"] == counters["pending_partitions"] == document["counters"]["pending_partitions"]
    assert memory["hosts"][0]["used_bytes"] == document["memory"]["used_bytes"]
    proving = {w["worker_id"] for w in document["gpu_workers"] if w["state"] == "proving"}
    cards = reads.workers_context(state, None, {})
    assert {f"{w.host}/{w.device}/W{w.ordinal}" for w in cards["workers"] if w.pk in cards["proving"]} == proving


def _partition_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if 'FROM "engine_partition"' in q["sql"]]


def test_a_pass_for_a_hosts_heartbeat_reads_no_partition_of_the_farm(farm: Farm) -> None:
    from engine.console.render import render

    with CaptureQueriesContext(connection) as queries:
        rendered = render({"hosts", "devices"})
    assert _partition_reads(queries) == [] and set(rendered.roots) == {"hosts", "devices"}


def test_a_pass_redrawing_one_jobs_row_reads_only_that_jobs_cells(farm: Farm) -> None:
    from engine.console.fragments import Want
    from engine.console.render import render

    first = render({"pipelines"})
    with CaptureQueriesContext(connection) as queries:
        rendered = render(Want({"pipelines"}, {SNAP_ID}), known={"pipelines": first.digest("pipelines")})
    (cells,) = _partition_reads(queries)
    assert " IN (" in cells and not rendered.full
    # The row it drew is the row a full pass draws (digests leave out the ticking durations).
    rows = [key for key, unit in rendered.units.items() if key != "pipelines" and unit.html is not None]
    assert rows and all(rendered.digest(key) == first.digest(key) for key in rows)


def test_a_farm_read_in_part_refuses_what_it_did_not_read_once_its_snapshot_ended(farm: Farm) -> None:
    from engine.status.read_model import NotRead

    with live_farm() as state:
        hosts = state.hosts
    assert state.hosts is hosts  # what was read stays readable
    with pytest.raises(NotRead, match="parts"):
        _ = state.parts
