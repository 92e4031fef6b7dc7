"""The memory budget bounds the engine's whole process tree, not only its keys and partitions:
the processes at rest are reserved under "engine processes" at start, each synthesis process's
compiled matrices under "compiled <circuit> in synthesis-<n>" before it first synthesizes the
circuit (a process keeps one circuit's), and a key's load holds its reader's buffers under
"loading key:<circuit>" while it reads (bench/results/scale.md: what the budget left out)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.circuits.kinds import CircuitShape, circuit_for
from engine.circuits.sizing import MemoryNeeds
from engine.pipeline import keys
from engine.pipeline.keycache import KeyCache
from engine.pipeline.memory import MemoryBudgetError, MemoryManager
from engine.status.holdings import PROCESSES_OWNER, compiled_owner, loading_owner


def test_a_key_load_holds_its_readers_buffers_beside_the_key_until_it_has_read() -> None:
    memory = MemoryManager(1000)
    seen: list[dict[str, int]] = []

    def load(circuit_id: str) -> object:
        seen.append(memory.snapshot()["by_owner"])
        return object()

    cache = KeyCache(memory, load, transient=lambda circuit_id: 300)
    cache.checkout("porep-c2/tiny", 400)
    assert seen == [{"key:porep-c2/tiny": 400, loading_owner("porep-c2/tiny"): 300}]
    assert memory.snapshot()["by_owner"] == {"key:porep-c2/tiny": 400} and memory.peak == 700


def test_a_key_whose_load_cannot_fit_the_budget_with_its_buffers_is_refused_saying_so() -> None:
    memory = MemoryManager(1000)
    cache = KeyCache(memory, lambda circuit_id: object(), transient=lambda circuit_id: 700)
    with pytest.raises(MemoryBudgetError, match="while it reads"):
        cache.checkout("porep-c2/tiny", 400)
    assert memory.used == 0


def test_the_load_buffers_are_the_zkeys_size(engine_params) -> None:
    keys.load_proving_key("winning-post/tiny")  # makes the development key on first use
    from django.conf import settings

    zkey = settings.PROVINGSITE["PARAMS_DIR"] / "winning-post-tiny.zkey"
    assert keys.load_transient_bytes("winning-post/tiny") == zkey.stat().st_size > 0


@pytest.mark.django_db(transaction=True)
def test_the_engine_reserves_its_processes_at_rest_when_it_starts(start_engine, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CHARGE_PROCESSES": True}
    engine = start_engine(synthesis=2, workers_per_device=1)
    held = engine.memory.snapshot()["by_owner"]
    # the interpreters alone are tens of MiB each: the engine and two synthesis processes
    assert engine.processes is not None
    assert held[PROCESSES_OWNER] == engine.processes.nbytes > 3 * (20 << 20)


@pytest.mark.django_db(transaction=True)
def test_status_and_the_memory_panel_show_what_the_engine_holds_beside_keys_and_partitions(start_engine,
                                                                                          settings) -> None:
    from engine.console.reads import memory_context
    from engine.status.farm import farm_snapshot
    from engine.status.read_model import live_farm

    settings.PROVINGSITE = {**settings.PROVINGSITE, "CHARGE_PROCESSES": True}
    engine = start_engine(synthesis=1, workers_per_device=1)
    submit_demo("winning-post", "shown-1")
    assert engine.run_until_idle(timeout=120)
    # The heartbeat writes none of it: the host row is written when one of them changes.
    wanted = {PROCESSES_OWNER: engine.processes.nbytes if engine.processes else 0,
              compiled_owner("winning-post/tiny", 0): circuit_for("winning-post", "tiny").compiled_bytes}

    [host] = [h for h in farm_snapshot()["hosts"] if h["name"] == engine.host.name]
    assert wanted.items() <= host["memory"]["by_owner"].items()
    assert host["memory"]["by_owner"] == engine.memory.snapshot()["by_owner"]  # the same total as the engine's
    with live_farm() as farm:
        [panel] = [h for h in memory_context(farm)["hosts"] if h["host"].name == engine.host.name]
    assert wanted.keys() <= {segment["owner"] for segment in panel["segments"]}


@pytest.mark.django_db(transaction=True)
def test_an_engine_whose_processes_alone_exceed_its_budget_does_not_start(engine_params, settings) -> None:
    from engine.pipeline.host import Engine, EngineConfig

    settings.PROVINGSITE = {**settings.PROVINGSITE, "CHARGE_PROCESSES": True}
    engine = Engine(EngineConfig.from_settings(devices="cpu", scale="tiny", budget="16MiB", synthesis=1,
                                               workers_per_device=1, host_name="small-host")).prepare()
    try:
        engine.synthesis.warm_up()
        with pytest.raises(MemoryBudgetError, match="engine processes"):
            engine._charge_processes()
    finally:
        engine.finalizers.stop()
        engine.synthesis.stop()


def tiny_figures(kind: str) -> tuple[CircuitShape, MemoryNeeds, int]:
    """A tiny circuit (its key made: making it compiles the circuit), what one partition needs,
    and what its key is charged (points, matrices, fixed-base tables)."""
    shape = circuit_for(kind, "tiny")
    keys.load_proving_key(f"{kind}/tiny")
    needs = shape.memory
    return shape, needs, needs.key_bytes + keys.table_bytes(needs)


def submit_demo(kind: str, job_id: str) -> None:
    from engine.circuits.kinds import demo_inputs, validate_inputs
    from engine.ledger.submission import Submission, submit

    inputs, n = validate_inputs(kind, demo_inputs(kind))
    submit(Submission(kind=kind, job_id=job_id, inputs=inputs, num_partitions=min(n, 2), circuit_id=f"{kind}/tiny",
                      scale="tiny"))


@pytest.mark.django_db(transaction=True)
def test_a_synthesis_process_keeps_one_circuits_compiled_matrices_and_they_are_reserved(start_engine) -> None:
    from engine.models import ProofJob
    from engine.states import JobState

    engine = start_engine(synthesis=1, workers_per_device=1)
    porep, winning = circuit_for("porep-c2", "tiny"), circuit_for("winning-post", "tiny")

    submit_demo("porep-c2", "compiled-1")
    assert engine.run_until_idle(timeout=120)
    assert ProofJob.objects.get(job_id="compiled-1").state == JobState.DONE
    assert engine.memory.snapshot()["by_owner"][compiled_owner("porep-c2/tiny", 0)] == porep.compiled_bytes

    # the one process moves to another circuit: the first one's matrices are given back
    submit_demo("winning-post", "compiled-2")
    assert engine.run_until_idle(timeout=120)
    assert ProofJob.objects.get(job_id="compiled-2").state == JobState.DONE
    owners = engine.memory.snapshot()["by_owner"]
    assert owners[compiled_owner("winning-post/tiny", 0)] == winning.compiled_bytes
    assert compiled_owner("porep-c2/tiny", 0) not in owners


def test_the_engines_own_reservations_are_reported_when_they_change_and_only_then() -> None:
    memory = MemoryManager(1000)
    reports: list[dict[str, int]] = []
    memory.watch(lambda owner: owner.startswith("compiled "),
                 lambda: reports.append(dict(memory.snapshot()["by_owner"])))
    with memory.acquire("partition P0", 100):  # not the engine's own: no report
        compiled = memory.acquire(compiled_owner("porep-c2/tiny", 0), 300)
        compiled.release()
    assert reports == [{"partition P0": 100, compiled_owner("porep-c2/tiny", 0): 300}, {"partition P0": 100}]


@pytest.fixture
def own_circuits_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Path]:
    """A cache directory of this test's own, its compiled kernels the shared ones': another test
    process (bin/test runs several) may compile any circuit into the shared cache at any moment,
    and this test's engine must find its circuit missing."""
    from engine.circuits import compiled

    shared = Path(settings.PROVINGSITE["CACHE_DIR"])
    (shared / "kernels").mkdir(parents=True, exist_ok=True)  # none built yet: they are built there
    (tmp_path / "kernels").symlink_to(shared / "kernels", target_is_directory=True)
    monkeypatch.setenv("PROVINGSITE_CACHE_DIR", str(tmp_path))  # the synthesis processes' settings
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CACHE_DIR": tmp_path}
    compiled.use_disk_cache(tmp_path)
    try:
        yield tmp_path
    finally:
        compiled.use_disk_cache(shared)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("own_circuits_cache")
def test_a_process_compiling_a_circuit_the_cache_lacks_holds_the_compiles_peak_until_it_has_it(start_engine) -> None:
    from engine.circuits import compiled
    from engine.models import ProofJob
    from engine.states import JobState

    shape, _, _ = tiny_figures("window-post")
    path = compiled._cache_path(shape)
    assert path is not None
    path.unlink(missing_ok=True)  # stored by tiny_figures; every process of this test's engine then finds it missing
    engine = start_engine(synthesis=1, workers_per_device=1)
    owner = compiled_owner("window-post/tiny", 0)
    seen: list[int] = []
    engine.memory.watch(lambda o: o == owner, lambda: seen.append(engine.memory.snapshot()["by_owner"].get(owner, 0)))

    submit_demo("window-post", "first-compile")
    assert engine.run_until_idle(timeout=120)
    assert ProofJob.objects.get(job_id="first-compile").state == JobState.DONE
    # tests charge no interpreter (CHARGE_PROCESSES off), so the child's base is not in it
    assert seen[:2] == [compiled.COMPILE_PEAK * shape.compiled_bytes, shape.compiled_bytes]
    assert path.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("own_circuits_cache")
def test_a_first_compile_that_fits_only_without_the_idle_hot_key_evicts_it_and_the_job_is_proved(start_engine) -> None:
    from engine.circuits import compiled
    from engine.models import ProofJob
    from engine.pipeline.keycache import KeyTier
    from engine.states import JobState

    shape, needs, key = tiny_figures("window-post")
    # room for the key, one partition and the matrices kept, not for the key beside a compile
    budget = key + needs.partition_bytes + shape.compiled_bytes + (64 << 10)
    peak = compiled.COMPILE_PEAK * shape.compiled_bytes
    assert key + peak > budget
    path = compiled._cache_path(shape)
    assert path is not None
    path.unlink(missing_ok=True)  # stored by tiny_figures: the engine's process must compile it
    engine = start_engine(budget=str(budget), synthesis=1, workers_per_device=1)
    engine.keycache.preload("window-post/tiny", KeyTier.HOT, key)
    owner = compiled_owner("window-post/tiny", 0)
    seen: list[int] = []
    engine.memory.watch(lambda o: o == owner, lambda: seen.append(engine.memory.snapshot()["by_owner"].get(owner, 0)))

    submit_demo("window-post", "tight-compile")
    assert engine.run_until_idle(timeout=120)
    assert ProofJob.objects.get(job_id="tight-compile").state == JobState.DONE
    assert seen[:2] == [peak, shape.compiled_bytes]
    assert engine.memory.peak <= budget


@pytest.mark.django_db(transaction=True)
def test_what_the_processes_keep_after_work_is_reserved_once_the_engine_is_idle(start_engine, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CHARGE_PROCESSES": True}
    engine = start_engine(synthesis=1, workers_per_device=1)
    assert engine.processes is not None
    at_start = engine.processes.nbytes
    kept = bytearray(96 << 20)  # the engine's process (this one) keeps 96 MiB more, touched
    kept[:: 4096] = b"\1" * len(kept[:: 4096])

    engine.recharge_processes(settle_s=0)

    grown = engine.processes.nbytes - at_start
    assert 80 << 20 <= grown <= 112 << 20
    assert engine.memory.snapshot()["by_owner"][PROCESSES_OWNER] == engine.processes.nbytes
    del kept


@pytest.mark.django_db(transaction=True)
def test_the_rest_is_not_measured_while_a_partition_is_in_flight(engine_params, settings) -> None:
    from engine.pipeline.host import Engine, EngineConfig

    settings.PROVINGSITE = {**settings.PROVINGSITE, "CHARGE_PROCESSES": True}
    engine = Engine(EngineConfig.from_settings(devices="cpu", scale="tiny", budget="2GiB", synthesis=1,
                                               workers_per_device=1, host_name="busy-host")).prepare()
    try:
        engine.synthesis.warm_up()
        engine._charge_processes()
        assert engine.processes is not None
        at_start = engine.processes.nbytes
        submit_demo("winning-post", "busy-1")
        (claim,) = engine.writer.claim(1)
        engine.adopt(claim)  # in flight: what the process holds now is partly the partition's
        kept = bytearray(96 << 20)
        kept[:: 4096] = b"\1" * len(kept[:: 4096])

        engine.recharge_processes(settle_s=0)

        assert engine.processes.nbytes == at_start
        del kept
    finally:
        engine.finalizers.stop()
        engine.synthesis.stop()


@pytest.mark.django_db(transaction=True)
def test_a_partition_that_cannot_fit_beside_its_key_and_the_engines_own_fails_at_once_saying_so(start_engine) -> None:
    from engine.models import Partition
    from engine.states import PartitionState

    shape, needs, key = tiny_figures("winning-post")
    budget = 8 << 20
    engine = start_engine(budget=str(budget), synthesis=1, workers_per_device=1)
    # the processes at rest leave room for the key, not for it and a partition (tests charge none by default)
    rest = engine.memory.acquire(PROCESSES_OWNER, budget - key - shape.compiled_bytes - needs.partition_bytes + 1)

    submit_demo("winning-post", "no-room")
    assert engine.run_until_idle(timeout=60)  # not waiting for ever
    errors = set(Partition.objects.filter(job__job_id="no-room").values_list("error", flat=True))
    states = set(Partition.objects.filter(job__job_id="no-room").values_list("state", flat=True))
    assert states == {PartitionState.FAILED}
    assert all("the engine's own" in e and ("beside its proving key" in e or "while it reads" in e) for e in errors), errors
    rest.release()


@pytest.mark.django_db(transaction=True)
def test_a_synthesis_process_that_dies_is_replaced_and_what_it_held_is_given_back(start_engine) -> None:
    import os
    import signal

    from engine.models import ProofJob
    from engine.states import JobState

    engine = start_engine(synthesis=1, workers_per_device=1)
    submit_demo("winning-post", "before-death")
    assert engine.run_until_idle(timeout=120)
    [dead] = engine.synthesis.pids()
    os.kill(dead, signal.SIGKILL)  # as the kernel's OOM killer would

    submit_demo("winning-post", "after-death")
    assert engine.run_until_idle(timeout=120)
    assert ProofJob.objects.get(job_id="after-death").state == JobState.DONE
    pids = engine.synthesis.pids()
    assert pids and dead not in pids
    # the new process's matrices are reserved once: the dead one's were given back
    held = engine.memory.snapshot()["by_owner"]
    assert held[compiled_owner("winning-post/tiny", 0)] == circuit_for("winning-post", "tiny").compiled_bytes
