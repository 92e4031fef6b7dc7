"""Only device work under a device's lock (issue 46): a real engine proves on "cuda:0", whose
kernels are the host emulation's (tests.prover.grid_emu), and every step of a launch says
whether it ran with the device's lock held. The witness check, spreading a, b, c over the
domain and staging them for the upload are the host's and run before the lock; the uploads
and the kernels are the device's and run under it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from engine.prover import statement
from engine.prover.backends import cuda
from tests.prover.grid_emu import EmulatedGrid

GiB = 1 << 30


class RecordingLock:
    """A device's lock that knows which thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: int | None = None

    def __enter__(self) -> RecordingLock:
        self._lock.acquire()
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc: object) -> None:
        self.owner = None
        self._lock.release()

    def mine(self) -> bool:
        return self.owner == threading.get_ident()


def recorded(steps: list[tuple[str, bool]], lock: RecordingLock, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def step(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name.startswith("gpu-"):  # the proving workers' steps
            steps.append((name, lock.mine()))
        return real(*args, **kwargs)

    return step


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_launch_holds_the_devices_lock_for_the_devices_work_alone(start_engine, monkeypatch) -> None:
    from engine.models import ProofJob
    from engine.pipeline import devices, host
    from engine.states import JobState
    from tests.engine.test_process_budget import submit_demo

    grid = EmulatedGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    monkeypatch.setattr(devices, "cuda_devices", lambda: [devices.Device("cuda:0", "an emulated GPU")])
    monkeypatch.setattr(host, "gpu_memory", lambda name: {"total": 8 * GiB, "free": 8 * GiB, "pool_used": 0})
    lock, steps = RecordingLock(), list[tuple[str, bool]]()
    for name, module, attr in (("check the witness", statement, "validate"),
                               ("spread a, b, c over the domain", statement, "domain_evals"),
                               ("stage for the upload", grid, "stage"),
                               ("upload", grid, "upload"),
                               ("kernel", grid, "_launch")):
        monkeypatch.setattr(module, attr, recorded(steps, lock, name, getattr(module, attr)))
    engine = start_engine(devices="cuda:0", workers_per_device=1, cpu_max_domain=0)
    for worker in engine.workers:
        worker.lock = lock
    submit_demo("winning-post", "under-the-lock")
    assert engine.run_until_idle(timeout=240)
    assert ProofJob.objects.get(job_id="under-the-lock").state == JobState.DONE

    host_steps = {"check the witness", "spread a, b, c over the domain", "stage for the upload"}
    assert {name for name, _ in steps} == host_steps | {"upload", "kernel"}, steps
    assert [(n, held) for n, held in steps if n in host_steps and held] == []  # none of the host's work under it
    assert all(held for n, held in steps if n not in host_steps)  # every upload and kernel under it
