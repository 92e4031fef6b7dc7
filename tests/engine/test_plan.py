"""The engine's defaults where the operator left them to it (engine.pipeline.plan): synthesis
processes from the cores and the devices, the pacer per device, batching on CUDA, and on a GPU
host the circuits the device would prove slower than the CPU proved on the CPU by rule."""

from __future__ import annotations

import pytest

from engine.pipeline.plan import plan

GiB = 1 << 30


def test_a_gpu_host_leaves_a_core_per_device_and_one_for_the_engine_and_batches_by_four() -> None:
    p = plan(cores=16, gpus=1, cpu_max_domain=2048, nice=5)
    assert (p.synthesis, p.batch_max, p.pace_ahead, p.cpu_lane, p.nice) == (14, 4, 4, True, 5)
    assert p.pace_target(lanes=2) == 14 + 4 * 2
    assert plan(cores=64, gpus=4).synthesis == 59


def test_a_cpu_host_synthesizes_on_half_its_cores_and_proves_one_at_a_time() -> None:
    p = plan(cores=2, gpus=0, cpu_max_domain=2048, nice=5)
    # the provers are the cores: a niced synthesis would lose to every other process and starve them
    assert (p.synthesis, p.batch_max, p.pace_ahead, p.cpu_lane, p.cpu_max_domain, p.nice) == (1, 1, 2, False, 0, 0)
    assert plan(cores=1, gpus=0).synthesis == 1


def test_what_the_operator_sets_is_taken_as_it_is() -> None:
    p = plan(cores=16, gpus=1, synthesis=3, pace_ahead=7, batch_max=1, cpu_max_domain=0)
    assert (p.synthesis, p.pace_ahead, p.batch_max, p.cpu_lane) == (3, 7, 1, False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize(("cpu_max_domain", "proved_on"), [(2048, "cpu"), (0, "cuda:0")])
def test_on_a_gpu_host_a_circuit_the_device_would_lose_on_is_proved_on_the_cpu(
        start_engine, monkeypatch, cpu_max_domain: int, proved_on: str) -> None:
    from engine.models import Partition, ProofJob
    from engine.pipeline import devices, host
    from engine.prover.backends import cuda
    from engine.states import JobState
    from tests.engine.test_process_budget import submit_demo
    from tests.prover.grid_emu import EmulatedGrid

    grid = EmulatedGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    monkeypatch.setattr(devices, "cuda_devices", lambda: [devices.Device("cuda:0", "an emulated GPU")])
    monkeypatch.setattr(host, "gpu_memory", lambda name: {"total": 8 * GiB, "free": 8 * GiB, "pool_used": 0})
    engine = start_engine(devices="cuda:0", workers_per_device=1, cpu_max_domain=cpu_max_domain)
    assert sorted(w.device for w in engine.workers) == (["cpu", "cuda:0"] if cpu_max_domain else ["cuda:0"])
    submit_demo("winning-post", f"small-{proved_on}")  # 845 constraints: a domain of 1024 rows
    assert engine.run_until_idle(timeout=240)
    assert ProofJob.objects.get(job_id=f"small-{proved_on}").state == JobState.DONE
    [part] = Partition.objects.filter(job__job_id=f"small-{proved_on}")
    assert part.worker is not None and part.worker.device == proved_on
