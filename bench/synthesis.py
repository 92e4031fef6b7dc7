"""Synthesis benchmark: constraints, time per partition (witness vs sparse products), pool speed-up.

    .venv/bin/python bench/synthesis.py                 # tiny, small, medium
    .venv/bin/python bench/synthesis.py --scales large  # the 2^20 GPU-benchmark circuits

Per circuit: the one-time shape compile (matrices, cached per process), then the median of
``--repeat`` partition syntheses split into witness computation and the three CSR
products. Then a job's partitions synthesized by a ProcessPoolExecutor of 1 and of 2
workers (warmed: each worker compiles the shape and builds the sector tree in its
initializer, outside the timing; one native product thread per worker).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")

from engine.circuits.kinds import KINDS, circuit_for  # noqa: E402
from engine.circuits.synthesis import Timing, configure_worker, synthesize, synthesize_partition  # noqa: E402

SEEDS = {"sector_seed": "11" * 32, "randomness": "22" * 32, "data_seed": "33" * 32}


def inputs_for(kind: str, partitions: int = 1) -> dict[str, str | int]:
    out: dict[str, str | int] = {k: v for k, v in SEEDS.items() if k != "data_seed" or kind == "snap-update"}
    if kind == "window-post":
        out["partitions"] = partitions
    return out


def _warm(circuit_id: str, inputs: dict | None = None) -> None:
    """Worker initializer: one product thread, compiled shape and sector tree in the process cache."""
    configure_worker(1)
    kind, scale = circuit_id.split("/")
    shape = circuit_for(kind, scale)
    shape.r1cs()
    if inputs is not None:
        shape.partition_data(inputs, 0)


def _pool_seconds(circuit_id: str, inputs: dict, partitions: int, workers: int) -> float:
    # spawn: forking a process whose native kernels started OpenMP threads can deadlock.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_warm, initargs=(circuit_id, inputs)) as pool:
        # One throwaway task per worker so every initializer has run before the clock starts.
        list(pool.map(_warm, [circuit_id] * workers, [inputs] * workers))
        started = time.perf_counter()
        list(pool.map(synthesize_partition, [circuit_id] * partitions, [inputs] * partitions, range(partitions)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", nargs="+", default=["tiny", "small", "medium"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pool-circuit", default="porep-c2/medium", help="circuit for the pool speed-up")
    parser.add_argument("--pool-partitions", type=int, default=10)
    args = parser.parse_args()

    print(f"sparse products: native C kernel; cores: {os.cpu_count()}")
    print(f"{'circuit':24} {'constraints':>11} {'vars':>9} {'compile s':>9} {'synth s':>8} {'witness s':>9} {'products s':>10}")
    for scale in args.scales:
        for kind in KINDS:
            shape = circuit_for(kind, scale)
            t0 = time.perf_counter()
            shape.r1cs()
            compile_s = time.perf_counter() - t0
            inputs = inputs_for(kind)
            shape.partition_data(inputs, 0)  # builds the sector tree once (cached per process)
            runs = []
            for _ in range(args.repeat):
                timing = Timing()
                t0 = time.perf_counter()
                data = shape.partition_data(inputs, 0)  # challenges, leaves, paths: part of the witness
                timing.witness_s += time.perf_counter() - t0
                synthesize(shape, data, check=False, timing=timing)
                runs.append(timing)
            w = statistics.median(r.witness_s for r in runs)
            p = statistics.median(r.products_s for r in runs)
            print(f"{shape.circuit_id:24} {shape.n_constraints:>11,} {shape.n_vars:>9,} {compile_s:>9.2f} {w + p:>8.3f} {w:>9.3f} {p:>10.3f}", flush=True)

    kind = args.pool_circuit.split("/")[0]
    n = args.pool_partitions
    inputs = inputs_for(kind, n)
    one = _pool_seconds(args.pool_circuit, inputs, n, 1)
    two = _pool_seconds(args.pool_circuit, inputs, n, 2)
    print(f"pool speed-up on {args.pool_circuit}, {n} partitions: 1 worker {one:.2f} s, 2 workers {two:.2f} s, x{one / two:.2f}")


if __name__ == "__main__":
    main()
