"""Synthesis benchmark: the native path against the Python one it replaced, in the same run.

    .venv/bin/python bench/synthesis.py                      # every kind at medium and large
    .venv/bin/python bench/synthesis.py --scales medium --repeat 7
    .venv/bin/python bench/synthesis.py --memory             # + each path's peak in a fresh process (large)
    .venv/bin/python bench/synthesis.py --circom             # + circom's wasm witness, the same circuit
    .venv/bin/python bench/synthesis.py --circom --circom-cpp  # + circom's C++ generator

One thread: the process is pinned to one CPU (``--cpu``), so every native call runs one thread,
the old path's products and check included. A synthesis is what a synthesis process does for a
partition: its data (challenges, leaves, paths; the sector tree already built, as a process
keeps it per job), then the witness, A·w, B·w, C·w and the check (``check=True``). Old: the
data hashed by the Python Poseidon, the circuit in witness mode on Python ints, three native
CSR products and the vectorised check (engine.circuits.synthesis.synthesize_in_python). New:
the data hashed natively, the witness program in one kernel pass (synthesize). The two
alternate ``--repeat`` times; each path's best run is printed (on a shared machine the minimum
is the figure least touched by the neighbours; bench/_timing.py), with its phases, and the
ratio of the two. The sector tree's build (2^10 leaf hashes and the tile's tree) is timed
apart, Python against native, best of three.

The matrices and witness programs are compiled once into the cache (PROVINGSITE_CACHE_DIR, else
.cache): the first run at large takes minutes.

``--memory``: for each kind, a fresh process per path loads the compiled shape, builds the
tree, synthesizes one partition and reports its peak resident memory (VmHWM) and what it held
before the synthesis (VmRSS).

``--circom``: the winning-post/medium circuit written in circom (the same Poseidon instance and
constants over BLS12-381, the same 14 paths of 16 levels: 62,972 constraints) and compiled by
circom2 (tests/oracle's); its witness for the same partition's data computed by circom's own
JavaScript/wasm generator in node (warm, median of runs) and by the engine's wasmtime runner
(engine.prover.formats.wasm_witness), beside our slowest kind's medium synthesis (the slowest of
the comparison above), timed again in rounds alternating with node's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._table import markdown_table  # noqa: E402
from engine.circuits.compiled import compiled_shape, keep_only, use_disk_cache  # noqa: E402
from engine.circuits.kinds import KINDS, CircuitShape, circuit_for  # noqa: E402
from engine.circuits.merkle import TILE_DEPTH, SectorTree  # noqa: E402
from engine.circuits.poseidon import Hash2Many, hash2_many, hash2_many_python  # noqa: E402
from engine.circuits.synthesis import Timing, python_partition_data, synthesize, synthesize_in_python  # noqa: E402
from engine.prover.config import current  # noqa: E402

SEEDS = {"sector_seed": "11" * 32, "randomness": "22" * 32, "data_seed": "33" * 32}
PATHS = ("old", "new")


def inputs_for(kind: str, partitions: int = 1) -> dict[str, str | int]:
    out: dict[str, str | int] = {k: v for k, v in SEEDS.items() if k != "data_seed" or kind == "snap-update"}
    if kind == "window-post":
        out["partitions"] = partitions
    return out


def one_synthesis(shape: CircuitShape, inputs: dict, path: str) -> Timing:
    """One partition's synthesis by ``path`` ("old" or "new"), its phases timed."""
    timing = Timing()
    t0 = time.perf_counter()
    if path == "old":
        data = python_partition_data(shape, inputs, 0)
        timing.data_s = time.perf_counter() - t0
        synthesize_in_python(shape, data, check=True, timing=timing)
    else:
        data = shape.partition_data(inputs, 0)
        timing.data_s = time.perf_counter() - t0
        synthesize(shape, data, check=True, timing=timing)
    return timing


def tree_seconds(depth: int, hashes: Hash2Many) -> float:
    """A sector tree's build: its tile's leaf hashes and levels, and the levels above."""
    t0 = time.perf_counter()
    n = 1 << min(depth, TILE_DEPTH)
    SectorTree(depth, hashes([12345] * n, list(range(n))), hashes=hashes)
    return time.perf_counter() - t0


def compare(shape: CircuitShape, repeat: int) -> dict[str, list[Timing]]:
    inputs = inputs_for(shape.kind)
    for path in PATHS:
        one_synthesis(shape, inputs, path)  # warm: the sector tree and the matrices in this process
    runs: dict[str, list[Timing]] = {path: [] for path in PATHS}
    for _ in range(repeat):
        for path in PATHS:
            runs[path].append(one_synthesis(shape, inputs, path))
    return runs


def best(runs: list[Timing]) -> Timing:
    return min(runs, key=lambda t: t.total_s)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


# --- peak memory of one synthesis, in a fresh process -----------------------------------------


def _status_bytes(field: str) -> int:
    """A figure of /proc/self/status in bytes: VmRSS (resident now), VmHWM (this process's peak;
    unlike ru_maxrss, which counts the parent's resident set at the fork, it starts anew at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child_memory(circuit_id: str, path: str) -> None:
    """(in the child) load the shape, build the tree, synthesize once; print the figures."""
    kind, scale = circuit_id.split("/")
    shape = circuit_for(kind, scale)
    compiled_shape(shape)
    inputs = inputs_for(kind)
    if path == "old":  # the sector tree, built as the process builds it per job
        python_partition_data(shape, inputs, 0)
    else:
        shape.partition_data(inputs, 0)
    held, loading = _status_bytes("VmRSS"), _status_bytes("VmHWM")
    one_synthesis(shape, inputs, path)
    print(json.dumps({"held": held, "loading": loading, "peak": _status_bytes("VmHWM")}))


def peak_memory(circuit_id: str, path: str) -> dict[str, int]:
    done = subprocess.run([sys.executable, __file__, "--child-memory", circuit_id, path], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", nargs="+", default=["medium", "large"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the first allowed)")
    parser.add_argument("--memory", action="store_true", help="peak memory of each path in a fresh process")
    parser.add_argument("--memory-scale", default="large")
    parser.add_argument("--circom", action="store_true", help="circom's wasm witness on the same circuit")
    parser.add_argument("--circom-rounds", type=int, default=5)
    parser.add_argument("--circom-calls", type=int, default=5)
    parser.add_argument("--circom-cpp", action="store_true", help="with --circom: circom's C++ generator too")
    parser.add_argument("--child-memory", nargs=2, metavar=("CIRCUIT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})  # children inherit it: node and the memory probes run there too
    use_disk_cache(current().cache_dir)
    if args.child_memory:
        child_memory(*args.child_memory)
        return

    print(f"one thread (pinned to CPU {cpu}); load average {os.getloadavg()[0]:.2f} at the start")
    rows, slowest = [], (0.0, "")
    for scale in args.scales:
        for kind in args.kinds:
            shape = circuit_for(kind, scale)
            keep_only(shape)  # one shape's matrices at a time, as a synthesis process holds them
            t0 = time.perf_counter()
            compiled_shape(shape)
            load_s = time.perf_counter() - t0
            runs = compare(shape, args.repeat)
            b_old, b_new = best(runs["old"]), best(runs["new"])
            old, new = b_old.total_s, b_new.total_s
            if scale == "medium" and new > slowest[0]:
                slowest = (new, shape.circuit_id)
            rows.append([shape.circuit_id, f"{shape.n_constraints:,}", ms(old),
                         f"{ms(b_old.data_s)} / {ms(b_old.witness_s)} / {ms(b_old.products_s)}",
                         ms(new), f"{ms(b_new.data_s)} / {ms(b_new.witness_s)}", f"**{old / new:.1f}×**"])
            print(f"{shape.circuit_id:22} old {ms(old):>8} ms  new {ms(new):>7} ms  ×{old / new:5.1f}"
                  f"   (matrices ready in {load_s:.1f} s)", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end of the comparison")
    print()
    print(markdown_table(["circuit", "constraints", "old ms", "old: data / witness / products+check ms", "new ms",
                          "new: data / program ms", "old / new"], rows))
    trees = [[f"depth {d}", *(ms(min(tree_seconds(d, h) for _ in range(3))) for h in (hash2_many_python, hash2_many))]
             for d in sorted({circuit_for(k, s).depth for k in args.kinds for s in args.scales})]
    print()
    print(markdown_table(["sector tree (2^10-leaf tile)", "Python Poseidon ms", "native ms"], trees))

    if args.memory:
        mem_rows = []
        keep_only(None)
        for kind in args.kinds:
            circuit_id = f"{kind}/{args.memory_scale}"
            got = {path: peak_memory(circuit_id, path) for path in PATHS}
            mem_rows.append([circuit_id, *(f"{got[p]['held'] / 2**20:.0f} → {got[p]['peak'] / 2**20:.0f}" for p in PATHS),
                             f"{(got['new']['peak'] - got['old']['peak']) / 2**20:+.0f}"])
            print(f"{circuit_id}: " + ", ".join(f"{p} held {got[p]['held'] >> 20} MiB, peak {got[p]['peak'] >> 20} MiB"
                                                for p in PATHS), flush=True)
        print()
        print(markdown_table(["process", "old: held → peak MiB", "new: held → peak MiB", "new − old peak MiB"], mem_rows))

    if args.circom:
        from bench.circom_merkle import compare_with_circom

        shape = circuit_for(*slowest[1].split("/"))
        keep_only(shape)
        compiled_shape(shape)

        def ours() -> float:
            return one_synthesis(shape, inputs_for(shape.kind), "new").total_s

        compare_with_circom(ours, shape.circuit_id, args.circom_rounds, args.circom_calls, args.circom_cpp)


if __name__ == "__main__":
    main()
