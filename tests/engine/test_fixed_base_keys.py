"""The engine keeps each key with its fixed-base tables, and reserves their bytes with it:
first a bound, then, once the key is loaded, exactly what it holds."""

from __future__ import annotations

import pytest

from engine.circuits.kinds import circuit_for
from engine.pipeline import keys
from engine.prover.backends.cpu import fixed_base

SHAPE = circuit_for("winning-post", "tiny")


def test_a_key_the_engine_loads_has_tables_within_the_bytes_it_reserves_for_them(engine_params) -> None:
    pk = keys.load_proving_key(SHAPE.circuit_id)
    assert 0 < fixed_base.tables_nbytes(pk) <= keys.table_bytes(SHAPE.memory)


def test_with_fixed_base_off_a_key_has_no_tables_and_reserves_nothing_for_them(engine_params, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "FIXED_BASE": False}
    pk = keys.load_proving_key(SHAPE.circuit_id)
    assert fixed_base.tables_nbytes(pk) == 0 and keys.table_bytes(SHAPE.memory) == 0


@pytest.mark.django_db(transaction=True)
def test_a_claimed_partition_reserves_its_key_with_the_tables(engine_params, make_job) -> None:
    from engine.pipeline.host import Engine, EngineConfig

    make_job(kind="winning-post")
    engine = Engine(EngineConfig.from_settings(devices="cpu", workers_per_device=1, budget="64MiB",
                                               host_name="tables-host")).prepare()
    try:
        (claim,) = engine.writer.claim(1)
        item = engine.adopt(claim)
        needs = circuit_for("winning-post", "tiny").memory
        assert item.key_bytes == needs.key_bytes + needs.table_bytes
        key = engine.keycache.checkout(item.circuit_id, item.key_bytes)
        tables = fixed_base.tables_nbytes(key)
        assert 0 < tables <= needs.table_bytes
        # once loaded, the key's reservation is what it really holds, tables included
        (entry,) = engine.keycache.snapshot()
        assert entry["bytes"] == key.nbytes + tables
        assert engine.memory.snapshot()["by_owner"][f"key:{item.circuit_id}"] == entry["bytes"]
    finally:
        engine.finalizers.stop()
        engine.synthesis.stop()


@pytest.mark.django_db(transaction=True)
def test_a_partition_that_cannot_fit_beside_its_key_fails_at_once_saying_why(engine_params, make_job) -> None:
    from engine.models import Partition
    from engine.pipeline.host import Engine, EngineConfig
    from engine.pipeline.lifecycle import Phase, Start
    from engine.states import PartitionState

    held = keys.held_nbytes(keys.load_proving_key(SHAPE.circuit_id))  # the key with its tables
    # the cache reserves the estimate (tables at their bound) before it reads the key
    estimate = SHAPE.memory.key_bytes + keys.table_bytes(SHAPE.memory)
    make_job(kind="winning-post")
    engine = Engine(EngineConfig.from_settings(devices="cpu", workers_per_device=1, budget=str(max(held, estimate) + 1000),
                                               host_name="tight-host")).prepare()
    # The budget fits the key and not the partition; the load's reader buffers (as large as the
    # key at this size) are not the subject here: tests/engine/test_process_budget.py has them.
    engine.keycache.transient = None
    try:
        (claim,) = engine.writer.claim(1)
        item = engine.adopt(claim)
        engine.reservations.prepare = lambda item: None  # the key and the partition are the subject, not the matrices
        engine.inflight.run(item, Start())
        assert item.state.phase is Phase.FAILED
        row = Partition.objects.get(pk=claim.partition_id)
        assert row.state == PartitionState.FAILED and "beside its proving key" in row.error
        assert engine.memory.used == engine.keycache.reserved_bytes(item.circuit_id)  # only the idle key is left
    finally:
        engine.finalizers.stop()
        engine.synthesis.stop()
