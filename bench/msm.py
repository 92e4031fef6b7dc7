"""CPU MSM and NTT figures: our native kernels vs arkworks (py_arkworks_bls12381) on the
same inputs in the same process.

    .venv/bin/python bench/msm.py            # prints a table
    from bench.msm import run; rows = run()  # list of dicts, for bench/prover.py

Rows: {"what", "curve", "group", "n", "threads", "ours_s", "arkworks_s", "ratio"} where
ratio = ours / arkworks (< 1 means we are faster); arkworks has no BN254, so bn128 rows
have no ratio.
"""

from __future__ import annotations

import functools
import os
import random
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench._table import markdown_table
from bench._timing import best_of
from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, fr_to_limbs


def _ark_inputs(curve: str, group: str, bases: np.ndarray, ss: list[int]) -> tuple[Any, list[Any], list[Any]]:
    """The same points and scalars as arkworks objects (points decoded from our limbs)."""
    import py_arkworks_bls12381 as ark

    from engine.prover.params.curves import g1_from_mont, g2_from_mont

    cls = ark.G1Point if group == "g1" else ark.G2Point
    coords: list[tuple[int, ...]]
    if group == "g1":
        coords = [_finite(p) for p in g1_from_mont(bases, curve)]
    else:
        coords = [(*x, *y) for x, y in map(_finite, g2_from_mont(bases, curve))]
    ark_pts = [cls.from_xy_bytes_unchecked_le(b"".join(v.to_bytes(48, "little") for v in c)) for c in coords]
    return cls, ark_pts, [ark.Scalar(s) for s in ss]


def _finite[P](point: P | None) -> P:
    if point is None:
        raise ValueError("a base is the point at infinity")
    return point


def run(
    sizes: tuple[int, ...] = (12, 16),
    groups: tuple[str, ...] = ("g1", "g2"),
    curves: tuple[str, ...] = ("bls12381", "bn128"),
    repeat: int = 1,
) -> list[dict]:
    rows: list[dict] = []
    all_threads = native.default_threads()
    rng = random.Random(2024)
    for curve in curves:
        c = CURVES[curve]
        for group in groups:
            for log_n in sizes:
                n = 1 << log_n
                ks = [rng.randrange(1, c.r) for _ in range(n)]
                ss = [rng.randrange(c.r) for _ in range(n)]
                bases = getattr(native, f"{group}_mul_generator_batch")(curve, fr_to_limbs(ks))
                scalars = fr_to_limbs(ss)
                msm = getattr(native, f"msm_{group}")
                ark_t = None
                if curve == "bls12381":
                    cls, ab, asc = _ark_inputs(curve, group, bases, ss)
                    ark_t = best_of(functools.partial(cls.multiexp_unchecked, ab, asc), repeat)
                for threads in sorted({1, all_threads}):
                    ours = best_of(functools.partial(msm, curve, bases, scalars, threads=threads), repeat)
                    rows.append(
                        {
                            "what": f"msm_{group}",
                            "curve": curve,
                            "group": group,
                            "n": n,
                            "threads": threads,
                            "ours_s": ours,
                            "arkworks_s": ark_t,
                            "ratio": None if ark_t is None else ours / ark_t,
                        }
                    )
        a = fr_to_limbs([rng.randrange(c.r) for _ in range(1 << 16)])
        for threads in sorted({1, all_threads}):
            t = best_of(functools.partial(native.ntt, curve, a, threads=threads), max(repeat, 3))
            rows.append(
                {
                    "what": "ntt",
                    "curve": curve,
                    "group": "fr",
                    "n": 1 << 16,
                    "threads": threads,
                    "ours_s": t,
                    "arkworks_s": None,
                    "ratio": None,
                }
            )
    return rows


def format_table(rows: list[dict]) -> str:
    header = ("what", "curve", "n", "threads", "ours (ms)", "arkworks (ms)", "ours/arkworks")
    return markdown_table(
        header,
        (
            (
                r["what"],
                r["curve"],
                f"2^{int(np.log2(r['n']))}",
                r["threads"],
                f"{r['ours_s'] * 1e3:.1f}",
                "" if r["arkworks_s"] is None else f"{r['arkworks_s'] * 1e3:.1f}",
                "" if r["ratio"] is None else f"{r['ratio']:.2f}x",
            )
            for r in rows
        ),
    )


if __name__ == "__main__":
    quick = os.environ.get("BENCH_QUICK") == "1"
    rows = run(sizes=(12,) if quick else (12, 16))
    print(f"cores available: {native.default_threads()}  (arkworks uses its own thread pool)")
    print(format_table(rows))
