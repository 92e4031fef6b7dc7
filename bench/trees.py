"""Shared sector trees: a job's partitions synthesized by several processes, each tree built
once per host (engine.circuits.tree_cache) against once per process that meets the job.

    .venv/bin/python bench/trees.py                                  # porep-c2/medium, 2 and 8 processes
    .venv/bin/python bench/trees.py --circuit snap-update/medium --processes 4 --jobs 6

For each process count P, ``--jobs`` new jobs (a sector each, as every job is) have their
partitions dealt round-robin to P processes, partition i to process i mod P, as the engine's
free processes take a backlog's partitions; each process synthesizes its share job by job.
Run twice in the same command, with the tree cache off (each process builds the tree of every
job it meets, as before) and on (under a fresh directory). Printed: the CPU seconds all the
processes spent per job, the wall time, and the ratio off/on of each. CPU seconds are the
figure that carries to a bigger host: there the processes run side by side, here P of them
share two cores. Trees are written to a temporary directory, not the project's cache.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._table import markdown_table  # noqa: E402

WAIT_S = 600.0


def _share(circuit_id: str, jobs: list[tuple[dict, int]], process: int, processes: int, tree_dir: str | None,
           start: Any) -> float:
    """In a process of its own: partitions ``process``, ``process + P``, … of every job,
    synthesized; the CPU seconds it took."""
    from engine.circuits.compiled import use_disk_cache
    from engine.circuits.synthesis import configure_worker, synthesize_partition
    from engine.circuits.tree_cache import use_tree_cache

    use_disk_cache(REPO / ".cache")
    use_tree_cache(tree_dir)
    configure_worker(1)
    synthesize_partition(circuit_id, {**jobs[0][0], "sector_seed": secrets.token_hex(32)}, 0)  # loaded, not timed
    start.wait(WAIT_S)  # every process warm: they start together
    cpu = time.process_time()
    for inputs, partitions in jobs:
        for index in range(process, partitions, processes):
            synthesize_partition(circuit_id, inputs, index)
    return time.process_time() - cpu


def run(circuit_id: str, processes: int, jobs: int, shared: bool) -> tuple[float, float]:
    """(CPU seconds per job over all the processes, wall seconds per job)."""
    from engine.circuits.kinds import demo_inputs, parse_circuit_id, validate_inputs

    shape = parse_circuit_id(circuit_id)
    batch = [validate_inputs(shape.kind, demo_inputs(shape.kind)) for _ in range(jobs)]
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-trees-") as tree_dir, context.Manager() as manager:
        start = manager.Barrier(processes + 1)
        with context.Pool(processes) as pool:
            pending = pool.starmap_async(_share, [(circuit_id, batch, p, processes, tree_dir if shared else None, start)
                                                  for p in range(processes)],
                                         error_callback=lambda _: start.abort())
            start.wait(WAIT_S)  # broken (and raising) where a process failed before it
            started = time.perf_counter()
            cpu = pending.get(WAIT_S)
            wall = time.perf_counter() - started
    return sum(cpu) / jobs, wall / jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--circuit", default="porep-c2/medium")
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    rows = []
    for processes in args.processes:
        off = run(args.circuit, processes, args.jobs, shared=False)
        on = run(args.circuit, processes, args.jobs, shared=True)
        rows.append([str(processes), f"{1000 * off[0]:.0f}", f"{1000 * on[0]:.0f}", f"{off[0] / on[0]:.2f}",
                     f"{1000 * off[1]:.0f}", f"{1000 * on[1]:.0f}", f"{off[1] / on[1]:.2f}"])
        print(f"{processes} processes: {rows[-1]}", flush=True)
    print(f"\n{args.circuit}, {args.jobs} jobs per run, a new sector each; {os.cpu_count()} cores\n")
    print(markdown_table(["processes", "CPU ms/job, tree per process", "CPU ms/job, tree shared", "ratio",
                          "wall ms/job, per process", "wall ms/job, shared", "ratio"], rows))


if __name__ == "__main__":
    main()
