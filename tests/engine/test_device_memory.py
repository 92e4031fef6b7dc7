"""A CUDA device's memory is in the engine's budget: a key's bases are reserved on the device
before its first launch there and given back when the host drops the key or the device is
short (idle keys only), each launch's buffers from launch to finish, and the holdings are
written to the host row when they change. No GPU is needed: the bases are uploaded to the
host emulation of the kernels (tests.prover.grid_emu), whose launches are the device's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.pipeline.device_memory import DeviceMemory, device_budget_bytes, launch_bytes, launch_needs
from engine.pipeline.keycache import KeyCache
from engine.pipeline.memory import MemoryBudgetError, MemoryManager
from engine.prover.backends import cuda, cuda_backend
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.statement import assignment_from_r1cs
from tests.prover.grid_emu import EmulatedGrid

GiB = 1 << 30


def _key(curve: str = "bn128", constraints: int = 200, seed: int = 3) -> tuple[Any, Any]:
    r1cs, w = synthetic_circuit(curve, constraints, n_public=2, seed=seed)
    pk, _ = setup(r1cs, seed=seed + 1)
    return pk, assignment_from_r1cs(r1cs, w)


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    """Three small proving keys of one size, as three circuits."""
    return {circuit: _key(seed=seed)[0] for circuit, seed in (("a", 3), ("b", 5), ("c", 7))}


def _need(key: Any, k: int = 1) -> int:
    return cuda_backend.resident_bytes(key) + launch_bytes(key, k)


def _owners(memory: DeviceMemory, device: str = "cuda:0") -> dict[str, int]:
    return memory.snapshot()[device]["by_owner"]


# -- the budget -----------------------------------------------------------------------------


def test_auto_is_the_devices_total_less_the_margin_and_a_size_is_taken_as_it_is() -> None:
    assert device_budget_bytes("auto", "1GiB", 80 * GiB) == 79 * GiB
    assert device_budget_bytes("70GiB", "1GiB", 80 * GiB) == 70 * GiB
    assert device_budget_bytes("64MiB", "1GiB", None) == 64 << 20
    with pytest.raises(MemoryBudgetError, match="PROVINGSITE_DEVICE_MEMORY_BUDGET"):
        device_budget_bytes("auto", "1GiB", None)


def test_a_launch_holds_its_keys_bases_once_and_its_buffers_until_each_proof_is_finished(keys) -> None:
    a = keys["a"]
    memory = DeviceMemory({"cuda:0": 10 * _need(a, 2)})
    memory.hold("cuda:0", "a", a, "porep-c2 j1", partitions=[1, 2])  # a batch of two
    assert _owners(memory) == {"key:a": cuda_backend.resident_bytes(a), "porep-c2 j1": launch_bytes(a, 2)}
    memory.finished(1)
    assert _owners(memory)["porep-c2 j1"] == launch_bytes(a, 2) - launch_bytes(a, 2) // 2
    memory.finished(2)
    memory.finished(2)  # a second report of the same partition gives back nothing more
    assert _owners(memory) == {"key:a": cuda_backend.resident_bytes(a)}  # the bases stay for the next launch
    memory.hold("cuda:0", "a", a, "porep-c2 j2", partitions=[3])
    assert _owners(memory)["key:a"] == cuda_backend.resident_bytes(a)  # reserved once per device


def test_the_cpu_has_no_device_budget(keys) -> None:
    memory = DeviceMemory({"cuda:0": GiB})
    assert memory.hold("cpu", "a", keys["a"], "porep-c2 j1", partitions=[1]) is None
    assert _owners(memory) == {}


def test_a_launch_that_can_never_fit_beside_its_key_fails_at_once_saying_so_and_holds_nothing(keys) -> None:
    a = keys["a"]
    memory = DeviceMemory({"cuda:0": _need(a) - 1})
    with pytest.raises(MemoryBudgetError, match="beside its key's bases.*PROVINGSITE_DEVICE_MEMORY_BUDGET"):
        memory.hold("cuda:0", "a", a, "porep-c2 j1", partitions=[1])
    assert _owners(memory) == {}


# -- giving the bases back ------------------------------------------------------------------------


def test_a_clients_own_key_lets_its_bases_go_once_its_last_launch_is_finished(keys) -> None:
    a, grid = keys["a"], EmulatedGrid()
    memory = DeviceMemory({"cuda:0": 10 * _need(a)})
    memory.hold("cuda:0", "custom/upload-1", a, "custom j1", partitions=[1, 2], keep_bases=False)
    cuda_backend.bases_on(a, grid)
    memory.finished(1)
    assert "key:custom/upload-1" in _owners(memory)  # the batch's other proof still reads them
    memory.finished(2)
    assert _owners(memory) == {} and not cuda_backend.has_bases(a, 0)


def test_a_key_the_host_cache_drops_gives_back_its_bases_on_the_device(keys) -> None:
    a, grid = keys["a"], EmulatedGrid()
    device = DeviceMemory({"cuda:0": 10 * _need(a)})
    cache = KeyCache(MemoryManager(GiB), loader=lambda circuit_id: a, on_drop=device.key_dropped)
    key = cache.checkout("a", 1000)
    device.hold("cuda:0", "a", key, "porep-c2 j1", partitions=[1])
    cuda_backend.bases_on(key, grid)  # what the launch uploads (the emulated grid is device 0)
    device.finished(1)
    cache.check_in("a")
    assert cache.evict(1) > 0  # the host is short: the idle key goes cold
    assert _owners(device) == {} and not cuda_backend.has_bases(key, 0)


def test_a_short_device_drops_the_bases_of_idle_keys_and_never_those_of_a_key_in_flight(keys) -> None:
    a, b, c = keys["a"], keys["b"], keys["c"]
    grid = EmulatedGrid()
    memory = DeviceMemory({"cuda:0": _need(a) + _need(b) + 1000})
    memory.hold("cuda:0", "a", a, "porep-c2 j1", partitions=[1])  # in flight until finished
    memory.hold("cuda:0", "b", b, "porep-c2 j2", partitions=[2])
    for key in (a, b):
        cuda_backend.bases_on(key, grid)
    memory.finished(2)  # b is idle now, its bases still resident
    memory.hold("cuda:0", "c", c, "porep-c2 j3", partitions=[3])  # room made by dropping b's bases
    assert memory.resident("cuda:0") == ["a", "c"]
    assert cuda_backend.has_bases(a, 0) and not cuda_backend.has_bases(b, 0)

    # With a and c both in flight nothing is evictable: b waits (here: until it gives up).
    polls = iter(range(3))
    with pytest.raises(InterruptedError):
        memory.hold("cuda:0", "b", b, "porep-c2 j4", partitions=[4], cancelled=lambda: next(polls, None) is None)
    assert memory.resident("cuda:0") == ["a", "c"] and cuda_backend.has_bases(a, 0)
    assert "porep-c2 j4" not in _owners(memory)


# -- the estimate against what the device really holds ----------------------------------------------


def _distinct_bytes(arrays: list[Any]) -> int:
    """The bytes of these arrays, each buffer once (a view counts as its base)."""
    roots: dict[int, int] = {}
    for a in arrays:
        if isinstance(a, np.ndarray):
            while isinstance(a.base, np.ndarray):
                a = a.base
            roots[id(a)] = a.nbytes
    return sum(roots.values())


@pytest.mark.parametrize(("curve", "k"), [("bn128", 1), ("bls12381", 2)])
def test_the_estimate_covers_what_a_launch_holds_on_the_emulated_device(curve: str, k: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.prover import gpu_prove_start
    from engine.prover.groth16 import gpu_prove_start_batch

    grid = EmulatedGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    pk, asg = _key(curve)
    pendings = (gpu_prove_start_batch(pk, [asg] * k, "cuda:0") if k > 1 else [gpu_prove_start(pk, asg, "cuda:0")])
    # What the launch keeps (CudaLaunch.nbytes: H, the witness), each MSM's buffers (its
    # pending result's), the domain's twiddles the grid caches, and the key's bases.
    launch = pendings[0].launch
    assert isinstance(launch, cuda_backend.CudaLaunch)
    held = list(launch.keep) + list(grid._twiddles.values())
    for pending in pendings:
        for handle in pending.parts.values():
            whole: Any = getattr(handle, "whole", handle)  # a batch's row: its launch sequence's result
            held += [*whole.keep, whole.host]
    kept = _distinct_bytes(held)
    assert _distinct_bytes(list(launch.keep)) == launch.nbytes
    assert _distinct_bytes(list(cuda_backend._device_bases[pk].values())) == cuda_backend.resident_bytes(pk)

    needs = launch_needs(pk, k)
    assert kept <= needs.kept <= 1.05 * kept  # what stays until finished: counted, not guessed
    assert needs.total <= 2 * kept  # with the largest MSM's scratch, still not absurdly above


# -- the records ------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_engine_writes_each_devices_reservations_to_its_host_row_when_they_change_and_status_shows_them(
        keys, engine_params, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.models import EngineHost
    from engine.pipeline import devices, host
    from engine.status.farm import farm_snapshot

    # A host with one CUDA device of 8 GiB, as CuPy would report it (no GPU here).
    monkeypatch.setattr(devices, "cuda_devices", lambda: [devices.Device("cuda:0", "an emulated GPU")])
    monkeypatch.setattr(host, "gpu_memory", lambda name: {"total": 8 * GiB, "free": 8 * GiB, "pool_used": 0})
    config = host.EngineConfig.from_settings(devices="cuda:0", device_budget="auto", device_margin="1GiB",
                                             host_name="test-device-host", synthesis=1, workers_per_device=1)
    engine = host.Engine(config).prepare()
    try:
        assert engine.device_memory is not None and engine.keycache.on_drop == engine.device_memory.key_dropped
        assert all(w.device_memory is engine.device_memory for w in engine.workers)
        assert engine.finalizers.device_memory is engine.device_memory

        def row() -> dict[str, Any]:
            return EngineHost.objects.get(name="test-device-host").device_reserved

        assert row() == {"cuda:0": {"budget": 7 * GiB, "by_owner": {}}}  # written at start
        a = keys["a"]
        engine.device_memory.hold("cuda:0", "a", a, "porep-c2 j1", partitions=[1])
        wanted = {"key:a": cuda_backend.resident_bytes(a), "porep-c2 j1": launch_bytes(a)}
        assert row() == {"cuda:0": {"budget": 7 * GiB, "by_owner": wanted}}  # no heartbeat has run
        [shown] = [h for h in farm_snapshot()["hosts"] if h["name"] == "test-device-host"]
        assert shown["device_memory"] == [{"device": "cuda:0", "budget_bytes": 7 * GiB,
                                           "reserved_bytes": sum(wanted.values()), "by_owner": wanted}]
        engine.device_memory.finished(1)
        engine.device_memory.key_dropped("a")
        assert row() == {"cuda:0": {"budget": 7 * GiB, "by_owner": {}}}
    finally:
        engine.synthesis.stop()
        engine.finalizers.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_job_proved_on_the_emulated_device_holds_its_launches_until_finished_and_keeps_only_its_keys_bases(
        start_engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.models import ProofJob
    from engine.pipeline import devices, host
    from engine.states import JobState
    from tests.engine.test_process_budget import submit_demo

    # The engine's own proving stage and finalizer on "cuda:0", whose kernels are the host
    # emulation's: the device memory is reserved and given back by the real pipeline.
    grid = EmulatedGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    monkeypatch.setattr(devices, "cuda_devices", lambda: [devices.Device("cuda:0", "an emulated GPU")])
    monkeypatch.setattr(host, "gpu_memory", lambda name: {"total": 8 * GiB, "free": 8 * GiB, "pool_used": 0})
    # (a circuit this small goes to the host's CPU lane by rule: here the device is the subject)
    engine = start_engine(devices="cuda:0", workers_per_device=1, cpu_max_domain=0)
    submit_demo("winning-post", "on-the-device")
    assert engine.run_until_idle(timeout=240)
    assert ProofJob.objects.get(job_id="on-the-device").state == JobState.DONE

    assert engine.device_memory is not None
    key = engine.keycache._entries["winning-post/tiny"].key
    manager = engine.device_memory.managers["cuda:0"]
    resident = cuda_backend.resident_bytes(key)
    assert manager.snapshot()["by_owner"] == {"key:winning-post/tiny": resident}  # every launch given back
    assert manager.peak >= resident + launch_bytes(key)  # held while it proved
    assert cuda_backend.has_bases(key, 0)
