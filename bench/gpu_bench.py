"""GPU benchmarks: MSM (G1/G2, BLS12-381 and BN254), NTT, pinned transfers, and whole
Groth16 proofs against the CPU prover in the same process; results as JSON and a markdown table with the ratio to ANCHORS.md figures.

    .venv/bin/python bench/gpu_bench.py [--out DIR] [--quick]

Run by bench/gpu_check.sh. Each GPU timing is the best of a few runs after one warm-up,
measured around the stream (upload of scalars included for MSM; bases resident, as in
proving, where the key's points stay on the device).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from engine.prover import native
from engine.prover.curves import CURVES, fr_to_limbs

# ANCHORS.md figures (ms): ICICLE v3 on an RTX 4090 unless noted, and the H200 floor estimates
ANCHORS_MS: dict[tuple[str, str, str, int], tuple[float, str]] = {
    ("msm", "bls12381", "g1", 16): (7.8, "ICICLE v3 RTX 4090"),
    ("msm", "bls12381", "g1", 20): (24.7, "ICICLE v3 RTX 4090"),
    ("msm", "bls12381", "g1", 22): (28.4, "ZPrize 2023 winner"),
    ("msm", "bls12381", "g2", 20): (70.3, "ICICLE v3 RTX 4090"),
    ("msm", "bn128", "g1", 16): (2.95, "ICICLE v3 RTX 4090"),
    ("msm", "bn128", "g1", 20): (14.8, "ICICLE v3 RTX 4090"),
    ("msm", "bn128", "g2", 20): (44.9, "ICICLE v3 RTX 4090"),
    ("ntt", "bls12381", "fr", 20): (0.36, "ICICLE v3 RTX 4090"),
}
H200_FLOOR_MS = {
    ("msm", "bls12381", "g1", 20): 6.0,
    ("msm", "bls12381", "g1", 22): 21.0,
    ("ntt", "bls12381", "fr", 20): 0.16,
}


def _timed(dev: Any, fn: Any, repeat: int) -> float:
    fn().wait()  # warm-up: twiddles, allocator pools, module functions
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn().wait()
        best = min(best, time.perf_counter() - t)
    return best


def random_points(curve: str, group: str, n: int, seed: int) -> np.ndarray:
    """n distinct points: a few thousand computed exactly, then tiled (MSM cost does not
    depend on the points being distinct, and the CPU fixed-base batch for 2^22 G2 points
    would eat the time budget)."""
    c = CURVES[curve]
    rng = random.Random(seed)
    base_n = min(n, 1 << 14)
    ks = fr_to_limbs([rng.randrange(1, c.r) for _ in range(base_n)])
    pts = getattr(native, f"{group}_mul_generator_batch")(curve, ks)
    reps = (n + base_n - 1) // base_n
    return np.ascontiguousarray(np.tile(pts, (reps, 1))[:n])


def random_scalars(curve: str, n: int, seed: int) -> np.ndarray:
    c = CURVES[curve]
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2**63, size=(n, 4), dtype=np.uint64) * np.uint64(2)
    s[:, 3] %= np.uint64(c.r >> 192)  # keep every scalar below r
    return s


def run(quick: bool = False, deadline_s: float = 420.0) -> dict:
    from engine.prover import gpu

    t0 = time.monotonic()
    dev = gpu.get_device(0)
    import cupy

    info = {
        "device": dev.name(),
        "arch": dev.arch,
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cupy": cupy.__version__,
        "host": platform.node(),
    }
    rows: list[dict] = []

    def out_of_time() -> bool:
        return time.monotonic() - t0 > deadline_s

    msm_plan = [
        ("bls12381", "g1", (16, 20, 22)),
        ("bn128", "g1", (16, 20, 22)),
        ("bls12381", "g2", (20,)),
        ("bn128", "g2", (20,)),
    ]
    if quick:
        msm_plan = [(c, g, (16,)) for c, g, _ in msm_plan]
    for curve, group, logs in msm_plan:
        for lg in logs:
            if out_of_time():
                rows.append({"what": "msm", "curve": curve, "group": group, "log_n": lg, "skipped": "time budget"})
                continue
            n = 1 << lg
            bases = random_points(curve, group, n, lg)
            scalars = random_scalars(curve, n, lg)
            bases_dev = dev.upload_bases(bases)
            fn = getattr(dev, f"msm_{group}_async")
            t = _timed(dev, functools.partial(fn, curve, bases_dev, scalars), 3)
            # correctness spot check against the CPU kernels at the smallest size
            ok = None
            if lg <= 16:
                ok = bool(
                    np.array_equal(
                        fn(curve, bases_dev, scalars).wait(), getattr(native, f"msm_{group}")(curve, bases, scalars)
                    )
                )
            rows.append({"what": "msm", "curve": curve, "group": group, "log_n": lg, "ms": t * 1e3, "matches_cpu": ok})
            bases_dev = None  # free the device copy before the next size
    for curve in ("bls12381", "bn128"):
        for lg in (16,) if quick else (16, 20, 22):
            if out_of_time():
                continue
            a = random_scalars(curve, 1 << lg, lg)
            t = _timed(dev, functools.partial(dev.ntt_async, curve, a), 5)
            rows.append(
                {
                    "what": "ntt",
                    "curve": curve,
                    "group": "fr",
                    "log_n": lg,
                    "ms": t * 1e3,
                    "note": "includes pinned upload + download",
                }
            )
    # pinned vs pageable transfer rates
    nbytes = 256 << 20
    host = dev.pinned((nbytes // 8,))
    host[:] = 1
    d = cupy.empty(nbytes // 8, dtype=cupy.uint64)
    for kind, buf in (("pinned", host), ("pageable", np.ones(nbytes // 8, dtype=np.uint64))):
        d.set(buf, stream=dev.stream)
        dev.synchronize()
        t = time.perf_counter()
        d.set(buf, stream=dev.stream)
        dev.synchronize()
        up = nbytes / (time.perf_counter() - t) / 1e9
        t = time.perf_counter()
        d.get(stream=dev.stream, out=buf, blocking=False)
        dev.synchronize()
        down = nbytes / (time.perf_counter() - t) / 1e9
        rows.append({"what": "transfer", "kind": kind, "h2d_GBps": up, "d2h_GBps": down})
    rows += groth16_rows("cuda:0", out_of_time, (14,) if quick else (16, 18))
    for r in rows:
        key = (r.get("what"), r.get("curve"), r.get("group"), r.get("log_n"))
        if key in ANCHORS_MS and "ms" in r:
            ref, src = ANCHORS_MS[key]
            r["anchor_ms"], r["anchor_src"], r["ratio_to_anchor"] = ref, src, r["ms"] / ref
        if key in H200_FLOOR_MS and "ms" in r:
            r["h200_floor_ms"] = H200_FLOOR_MS[key]
    return {"info": info, "rows": rows, "elapsed_s": time.monotonic() - t0}


def groth16_rows(device: str, out_of_time: Any, logs: tuple[int, ...], reference: str = "cpu") -> list[dict]:
    """Whole Groth16 proofs of a synthetic circuit of 2^k constraints on ``device`` and on
    ``reference`` in this process (the ratio is the figure: same key, witness, r and s).
    Each device proof must be byte-identical to the reference proof and verify."""
    from engine.prover.groth16 import assignment_from_r1cs, prove, public_inputs_of
    from engine.prover.setup import setup, synthetic_circuit
    from engine.prover.verify import verify

    rows: list[dict] = []
    for curve in ("bls12381", "bn128"):
        for lg in logs:
            if out_of_time():
                rows.append({"what": "groth16", "curve": curve, "log_n": lg, "skipped": "time budget"})
                continue
            r1cs, witness = synthetic_circuit(curve, (1 << lg) - 3, n_public=2, seed=lg)
            pk, _ = setup(r1cs, seed=lg)
            asg = assignment_from_r1cs(r1cs, witness)
            on_device = functools.partial(prove, pk, asg, device=device, r=7, s=11)
            on_reference = functools.partial(prove, pk, asg, device=reference, r=7, s=11)
            proof = on_device()  # warm-up: kernels, the key's bases onto the device
            t_dev = min(_wall(on_device) for _ in range(3))
            t_ref = _wall(on_reference)
            rows.append({"what": "groth16", "curve": curve, "log_n": lg, "ms": t_dev * 1e3,
                         "reference": reference, "reference_ms": t_ref * 1e3, "speedup": t_ref / t_dev,
                         "identical_to_reference": proof == on_reference(),
                         # BN254 verification (py_ecc) takes seconds of a short GPU session; a
                         # proof identical to the CPU one is checked by the identity instead
                         "verifies": verify(pk.vk, proof, public_inputs_of(asg)) if curve == "bls12381" else None})
    return rows


def _wall(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def markdown(res: dict) -> str:
    i = res["info"]
    lines = [
        f"# GPU bench: {i['device']} ({i['arch']}), driver {i['driver']}, runtime {i['runtime']}, CuPy {i['cupy']}",
        "",
        "| what | curve | group | n | ms | anchor ms (source) | ours/anchor | H200 floor ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        if r["what"] in ("msm", "ntt"):
            if "ms" not in r:
                lines.append(
                    f"| {r['what']} | {r['curve']} | {r['group']} | 2^{r['log_n']} |"
                    f" skipped ({r.get('skipped')}) | | | |"
                )
                continue
            anc = f"{r['anchor_ms']} ({r['anchor_src']})" if "anchor_ms" in r else ""
            ratio = f"{r['ratio_to_anchor']:.2f}x" if "ratio_to_anchor" in r else ""
            lines.append(
                f"| {r['what']} | {r['curve']} | {r['group']} | 2^{r['log_n']} |"
                f" {r['ms']:.2f} | {anc} | {ratio} | {r.get('h200_floor_ms', '')} |"
            )
    lines += ["", "| transfer | H2D GB/s | D2H GB/s |", "|---|---|---|"]
    for r in res["rows"]:
        if r["what"] == "transfer":
            lines.append(f"| {r['kind']} | {r['h2d_GBps']:.1f} | {r['d2h_GBps']:.1f} |")
    lines += ["", "| groth16 | curve | n | ms | reference ms | speedup | identical | verifies |",
              "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        if r["what"] == "groth16":
            if "ms" not in r:
                lines.append(f"| groth16 | {r['curve']} | 2^{r['log_n']} | skipped ({r.get('skipped')}) | | | | |")
                continue
            lines.append(f"| groth16 | {r['curve']} | 2^{r['log_n']} | {r['ms']:.1f} | {r['reference_ms']:.1f}"
                         f" ({r['reference']}) | {r['speedup']:.1f}x | {r['identical_to_reference']} |"
                         f" {'not checked' if r['verifies'] is None else r['verifies']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from engine.prover.gpu import gpu_available, gpu_unavailable_reason

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if not gpu_available():
        print(f"gpu_bench: no GPU ({gpu_unavailable_reason()})", file=sys.stderr)
        return 2
    res = run(quick=args.quick)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_bench.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (out / "gpu_bench.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
