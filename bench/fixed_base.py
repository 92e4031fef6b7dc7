"""Fixed-base tables (engine/prover/backends/cpu/fixed_base.py): MSMs and whole proofs with and without
them, interleaved in one process, min of --repeat; every proof verified.

    .venv/bin/python bench/fixed_base.py
    .venv/bin/python bench/fixed_base.py --msm-sizes 10 12 --proof-sizes 12 --repeat 5

The MSM table runs COPIES copies at every size, past MAX_ROWS too, which is where the
engine's rule (no table above MAX_ROWS bases) comes from; ratio = with / without (< 1: the
table wins).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._table import markdown_table
from engine.prover import groth16
from engine.prover.backends.cpu import fixed_base, native
from engine.prover.params.curves import CURVES, fr_to_limbs
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.verify import verify


def _interleaved(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    best = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def msm_rows(curve: str, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    c, rng = CURVES[curve], random.Random(1)
    rows = []
    for group in ("g1", "g2"):
        mul_gen = native.g1_mul_generator_batch if group == "g1" else native.g2_mul_generator_batch
        shifted = native.g1_shifted_copies if group == "g1" else native.g2_shifted_copies
        plain = native.msm_g1 if group == "g1" else native.msm_g2
        copies_msm = native.msm_g1_copies if group == "g1" else native.msm_g2_copies
        for log_n in sizes:
            n = 1 << log_n
            bases = mul_gen(curve, fr_to_limbs([rng.randrange(1, c.r) for _ in range(n)]))
            scalars = fr_to_limbs([rng.randrange(c.r) for _ in range(n)])
            copies, shift = fixed_base.COPIES, fixed_base.shift_for(curve, group, fixed_base.COPIES)
            t = time.perf_counter()
            table = shifted(curve, bases, copies, shift)
            made = time.perf_counter() - t
            best = _interleaved({"plain": partial(plain, curve, bases, scalars),
                                 "table": partial(copies_msm, curve, table, scalars, copies, shift)}, repeat)
            rows.append({"curve": curve, "MSM": f"{group.upper()} 2^{log_n}", "table": f"{table.nbytes / 2**20:.1f} MiB",
                         "made in": f"{made:.2f} s", "without": f"{best['plain'] * 1e3:.1f} ms",
                         "with": f"{best['table'] * 1e3:.1f} ms", "ratio": f"{best['table'] / best['plain']:.2f}"})
            print(f"  {curve} {group} 2^{log_n} done", flush=True)
    return rows


def proof_rows(curve: str, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for log_n in sizes:
        n_public = 2
        r1cs, w = synthetic_circuit(curve, (1 << log_n) - n_public - 1, n_public=n_public, seed=log_n)
        pk, vk = setup(r1cs, seed=f"bench-fixed-base-{curve}-{log_n}")
        asg = groth16.assignment_from_r1cs(r1cs, w)
        plain = replace(pk, extra={})  # the same arrays, never given tables
        t = time.perf_counter()
        fixed_base.precompute(pk)
        made = time.perf_counter() - t
        best = _interleaved({"plain": partial(groth16.prove, plain, asg),
                             "table": partial(groth16.prove, pk, asg)}, repeat)
        if not verify(vk, groth16.prove(pk, asg), groth16.public_inputs_of(asg)):
            raise SystemExit(f"{curve} 2^{log_n}: a proof through the tables failed verification")
        rows.append({"curve": curve, "proof": f"2^{log_n}", "key": f"{pk.nbytes / 2**20:.1f} MiB",
                     "tables": f"{fixed_base.tables_nbytes(pk) / 2**20:.1f} MiB", "made in": f"{made:.2f} s",
                     "without": f"{best['plain'] * 1e3:.1f} ms", "with": f"{best['table'] * 1e3:.1f} ms",
                     "ratio": f"{best['table'] / best['plain']:.2f}"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--curves", nargs="+", default=["bls12381", "bn128"])
    ap.add_argument("--msm-sizes", type=int, nargs="*", default=[10, 12, 13, 16], help="log2 of the MSMs' bases")
    ap.add_argument("--proof-sizes", type=int, nargs="*", default=[10, 12], help="log2 of the proofs' domains")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    msms, proofs = [], []
    for curve in args.curves:
        msms += msm_rows(curve, args.msm_sizes, args.repeat)
        proofs += proof_rows(curve, args.proof_sizes, args.repeat)
    print(f"\nMSMs, {fixed_base.COPIES} copies (threads: {native.default_threads()})\n")
    print(markdown_table(list(msms[0]), [list(r.values()) for r in msms]))
    print(f"\nProofs, tables for MSMs of at most {fixed_base.MAX_ROWS} live bases (every proof verified)\n")
    print(markdown_table(list(proofs[0]), [list(r.values()) for r in proofs]))


if __name__ == "__main__":
    main()
