"""Host time inside a device's lock, per partition: the launch as it was against as it is.

    .venv/bin/python bench/device_lock.py                    # winning-post/tiny on the emulated grid
    .venv/bin/python bench/device_lock.py --device cuda:0    # on a real GPU

Before (issue 46): a worker held the device's lock over all of ``gpu_prove_start``: the witness
checked against the key, a, b, c spread over the domain, each copied into pinned memory, then
the uploads and kernels. Now the host's part (``gpu_prove_stage``) runs before the lock and
only ``gpu_prove_launch`` (uploads from the staged buffers, the kernels) under it.

Each figure is the median over ``--partitions`` launches of the same synthesized partition,
both ways in the same process: the lock's hold time, and the host's own steps inside it (the
witness check, the spreading, the staging copies), timed by wrappers around those steps. On
the emulated grid (tests/prover/grid_emu.py: the GPU's kernels run on the host, a thread index
at a time) the kernels are far slower than a GPU's, so the hold time is the emulation's; the
host steps inside it are the real host's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
os.environ.setdefault("PROVINGSITE_PARAMS_DIR", str(REPO / ".cache" / "engine-test-params"))
os.environ.setdefault("PROVINGSITE_DEV_KEYS", "1")  # keys for a scale are made once on first use


class Clock:
    """Host steps timed, counted only while the lock is held; the lock's hold time."""

    def __init__(self) -> None:
        self.inside = 0.0
        self.held = 0.0
        self.locked = False
        self._lock = threading.Lock()
        self._t0 = 0.0

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                if self.locked:
                    self.inside += time.perf_counter() - t0

        return timed

    def __enter__(self) -> None:  # the device's lock
        self._lock.acquire()
        self.locked, self._t0 = True, time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.held += time.perf_counter() - self._t0
        self.locked = False
        self._lock.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--circuit", default="winning-post/tiny")
    parser.add_argument("--device", default="emulated", help="emulated (the host emulation of cuda:0) or cuda:N")
    parser.add_argument("--partitions", type=int, default=5)
    args = parser.parse_args()

    from engine.circuits.synthesis import synthesize_partition
    from engine.ledger.demo import demo_inputs
    from engine.pipeline.keys import load_proving_key
    from engine.prover import groth16, statement
    from engine.prover.backends import cuda

    device = "cuda:0" if args.device == "emulated" else args.device
    if args.device == "emulated":
        from tests.prover.grid_emu import EmulatedGrid

        grid: Any = EmulatedGrid()
        cuda.get_device = lambda index=0: grid
    kind = args.circuit.split("/")[0]
    key = load_proving_key(args.circuit)
    from engine.circuits.kinds import validate_inputs

    inputs, _ = validate_inputs(kind, demo_inputs(kind))
    assignment = synthesize_partition(args.circuit, inputs, 0)

    clock = Clock()
    statement.validate = clock.wrap(statement.validate)
    statement.domain_evals = clock.wrap(statement.domain_evals)
    dev = cuda.get_device(0)
    dev.stage = clock.wrap(dev.stage)  # type: ignore[method-assign]

    def before() -> None:
        with clock:
            pending = groth16.gpu_prove_start(key, assignment, device)
        groth16.gpu_prove_finish(pending)

    def after() -> None:
        staged = groth16.gpu_prove_stage(key, assignment, device)
        with clock:
            pending = groth16.gpu_prove_launch(staged)
        groth16.gpu_prove_finish(pending)

    before()  # the kernels, the key's bases and twiddles warm
    rows = {}
    for name, run in (("before: all of gpu_prove_start in the lock", before),
                      ("after: gpu_prove_stage, then gpu_prove_launch in the lock", after)):
        held, host = [], []
        for _ in range(args.partitions):
            clock.inside = clock.held = 0.0
            run()
            held.append(clock.held)
            host.append(clock.inside)
        rows[name] = (statistics.median(held), statistics.median(host))
    where = "the emulated grid (host emulation of the GPU kernels)" if args.device == "emulated" else device
    print(f"{args.circuit} on {where}, median of {args.partitions} partitions")
    print(f"{'':58} {'lock held ms':>12} {'host work in the lock ms':>25}")
    for name, (held_s, host_s) in rows.items():
        print(f"{name:58} {1000 * held_s:>12.1f} {1000 * host_s:>25.2f}")


if __name__ == "__main__":
    import django

    django.setup()
    main()
