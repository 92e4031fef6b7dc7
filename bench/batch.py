"""What a batch of k proofs of one key buys per proof on the CPU backend: gpu_prove_start_batch
(one pass over the bases per MSM window for k witnesses) against k unbatched proofs, same key,
same witnesses and r, s, same process; the key's fixed-base tables built first, as the engine
does. Sizes are porep-c2's tiny and small partitions (synthetic circuits of that many rows).

    .venv/bin/python bench/batch.py [--sizes 845,5624] [--batches 2,4,8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._timing import best_of
from engine.prover.backends.cpu import fixed_base
from engine.prover.groth16 import assignment_from_r1cs, gpu_prove_finish, gpu_prove_start, gpu_prove_start_batch
from engine.prover.setup import setup, synthetic_circuit


def _alone(pk: Any, asgs: list[Any], rs: list[tuple[int, int]]) -> None:
    for asg, (r, s) in zip(asgs, rs, strict=True):
        gpu_prove_finish(gpu_prove_start(pk, asg, r=r, s=s))


def _together(pk: Any, asgs: list[Any], rs: list[tuple[int, int]]) -> None:
    for p in gpu_prove_start_batch(pk, asgs, randomness=list(rs)):
        gpu_prove_finish(p)


def run(sizes: list[int], batches: list[int], repeat: int, curve: str = "bls12381") -> list[dict[str, float]]:
    rows = []
    for n in sizes:
        r1cs, _ = synthetic_circuit(curve, n, n_public=2, seed=0)
        pk, _ = setup(r1cs, seed="bench")
        fixed_base.precompute(pk)
        k_max = max(batches)
        asgs = [assignment_from_r1cs(r1cs, synthetic_circuit(curve, n, n_public=2, seed=k)[1]) for k in range(k_max)]
        rs = [(k + 2, k + 3) for k in range(k_max)]
        for k in batches:
            alone = functools.partial(_alone, pk, asgs[:k], rs[:k])
            together = functools.partial(_together, pk, asgs[:k], rs[:k])
            t1, tb = best_of(alone, repeat) / k, best_of(together, repeat) / k
            row = {"constraints": n, "batch": k, "unbatched_ms": t1 * 1e3, "batched_ms": tb * 1e3, "ratio": tb / t1}
            rows.append(row)
            print(f"{curve} {n:>6} constraints  batch {k}:  unbatched {t1 * 1e3:7.1f} ms/proof  "
                  f"batched {tb * 1e3:7.1f} ms/proof  ratio {tb / t1:.2f}", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="845,5624")
    p.add_argument("--batches", default="2,4,8")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--curve", default="bls12381")
    a = p.parse_args()
    run([int(x) for x in a.sizes.split(",")], [int(x) for x in a.batches.split(",")], a.repeat, a.curve)


if __name__ == "__main__":
    main()
