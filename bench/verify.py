"""Groth16 verification time per proof: the native pairings (engine.prover.verify) against the
previous path (py_ecc for BN254, arkworks for BLS12-381; tests/prover/reference_verify.py), on
the committed snarkjs fixtures (tests/fixtures/snarkjs), in the same process.

    .venv/bin/python bench/verify.py [--repeat N]   # prints a table
    from bench.verify import run; rows = run()      # list of dicts

Rows: {"curve", "native_ms", "reference_ms", "reference", "speedup"}: the best of N runs of
one whole verification each (point checks, IC combination, pairing check), the key already
seen once (as when the engine reuses a key); speedup = reference / native.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._table import markdown_table
from bench._timing import best_of
from engine.prover.snarkjs import read_proof_json, read_public_json, read_vk_json
from engine.prover.verify import verify
from tests.prover.reference_verify import reference_verify

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "snarkjs"
REFERENCE = {"bn128": "py_ecc", "bls12381": "arkworks"}


def _best_ms(fn: Callable[[], bool], repeat: int) -> float:
    assert fn(), "the fixture proof must verify"  # also warms caches and the kernel build
    return best_of(fn, repeat) * 1000


def run(repeat: int = 5) -> list[dict[str, Any]]:
    rows = []
    for curve in ("bn128", "bls12381"):
        d = FIXTURES / curve
        vk, proof = read_vk_json(d / "verification_key.json"), read_proof_json(d / "proof.json")
        pub = read_public_json(d / "public.json")
        native_ms = _best_ms(functools.partial(verify, vk, proof, pub), repeat * 10)
        reference_ms = _best_ms(functools.partial(reference_verify, vk, proof, pub), repeat)
        rows.append(
            {
                "curve": curve,
                "native_ms": native_ms,
                "reference_ms": reference_ms,
                "reference": REFERENCE[curve],
                "speedup": reference_ms / native_ms,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of the reference path (native: 10x)")
    args = ap.parse_args()
    rows = run(args.repeat)
    print(
        markdown_table(
            ["curve", "native (ms)", "previous path", "previous (ms)", "previous / native"],
            [
                (
                    r["curve"],
                    f"{r['native_ms']:.2f}",
                    r["reference"],
                    f"{r['reference_ms']:.2f}",
                    f"{r['speedup']:.1f}x",
                )
                for r in rows
            ],
        )
    )


if __name__ == "__main__":
    main()
