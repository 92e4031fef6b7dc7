"""Groth16 prover benchmark: our CPU prover vs `snarkjs groth16 prove` on the same .zkey + .wtns.

    .venv/bin/python bench/prover.py                  # both curves, ~2^12 and ~2^16 constraints
    .venv/bin/python bench/prover.py --sizes 12 --no-msm

The circuits are synthetic R1CSs (engine.prover.setup.synthetic_circuit) whose keys come from
OUR development setup (snarkjs's own phase-2 preparation at 2^16 takes ~25 min); snarkjs
proves with that .zkey unchanged. Both sides are timed end to end (read key + witness, prove,
write proof.json/public.json; snarkjs additionally pays Node start-up, as it does in use);
ours is also shown for the proving step alone. Needs `npm ci --prefix tests/oracle`.
Ends with the kernels' MSM table (bench/msm.py's run()) unless --no-msm.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._table import markdown_table  # noqa: E402
from engine.prover import native  # noqa: E402
from engine.prover.groth16 import assignment_from_witness, prove, public_inputs_of  # noqa: E402
from engine.prover.setup import setup, synthetic_circuit  # noqa: E402
from engine.prover.snarkjs import (  # noqa: E402
    read_proof_json,
    read_public_json,
    read_wtns,
    read_zkey,
    write_proof_json,
    write_public_json,
    write_wtns,
    write_zkey,
)
from engine.prover.verify import verify  # noqa: E402

SNARKJS = REPO / "tests" / "oracle" / "node_modules" / ".bin" / "snarkjs"


def bench_one(curve: str, log_n: int, work: Path) -> dict:
    n_public = 2
    m = (1 << log_n) - n_public - 1  # fills the 2^log_n domain exactly
    r1cs, w = synthetic_circuit(curve, m, n_public=n_public, seed=log_n)
    t = time.perf_counter()
    pk, vk = setup(r1cs, seed=f"bench-{curve}-{log_n}")
    setup_s = time.perf_counter() - t
    zkey, wtns = work / f"{curve}-{log_n}.zkey", work / f"{curve}-{log_n}.wtns"
    write_zkey(zkey, pk)
    write_wtns(wtns, curve, w)
    del pk

    # ours, end to end, like the snarkjs command
    t = time.perf_counter()
    key = read_zkey(zkey)
    asg = assignment_from_witness(key, read_wtns(wtns, curve))
    t_prove = time.perf_counter()
    proof = prove(key, asg)
    prove_s = time.perf_counter() - t_prove
    write_proof_json(work / "ours.json", proof)
    write_public_json(work / "ours_pub.json", public_inputs_of(asg))
    ours_s = time.perf_counter() - t
    ok_ours = verify(vk, proof, public_inputs_of(asg))

    snark_s = None
    ok_snark = None
    if SNARKJS.exists():
        t = time.perf_counter()
        res = subprocess.run([str(SNARKJS), "groth16", "prove", str(zkey), str(wtns), str(work / "s.json"),
                              str(work / "s_pub.json")], capture_output=True, text=True)
        snark_s = time.perf_counter() - t
        if res.returncode != 0:
            raise RuntimeError(f"snarkjs failed: {res.stderr[-2000:]}")
        ok_snark = verify(vk, read_proof_json(work / "s.json"), read_public_json(work / "s_pub.json"))
    return {
        "curve": curve, "log_n": log_n, "constraints": m, "setup_s": setup_s, "ours_s": ours_s,
        "prove_s": prove_s, "snarkjs_s": snark_s, "ours_valid": ok_ours, "snarkjs_valid": ok_snark,
    }


def format_table(rows: list[dict]) -> str:
    header = ("curve", "constraints", "domain", "our setup (s)", "ours e2e (s)", "ours prove (s)", "snarkjs (s)",
              "snarkjs/ours", "proofs verify")
    return markdown_table(
        header,
        (
            (
                r["curve"],
                r["constraints"],
                f"2^{r['log_n']}",
                f"{r['setup_s']:.1f}",
                f"{r['ours_s']:.2f}",
                f"{r['prove_s']:.2f}",
                "n/a" if r["snarkjs_s"] is None else f"{r['snarkjs_s']:.2f}",
                "n/a" if r["snarkjs_s"] is None else f"{r['snarkjs_s'] / r['ours_s']:.1f}x",
                f"ours {r['ours_valid']}, snarkjs {r['snarkjs_valid']}",
            )
            for r in rows
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 16], help="log2 of the domain")
    ap.add_argument("--curves", nargs="+", default=["bn128", "bls12381"])
    ap.add_argument("--no-msm", action="store_true", help="skip the kernels' MSM table")
    args = ap.parse_args()
    print(f"cores: {native.default_threads()}; snarkjs: {SNARKJS if SNARKJS.exists() else 'missing'}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for curve in args.curves:
            for log_n in args.sizes:
                rows.append(bench_one(curve, log_n, Path(d)))
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    if not args.no_msm:
        try:
            sys.path.insert(0, str(REPO / "bench"))
            import msm  # the kernels engineer's MSM benchmark

            print()
            print(msm.format_table(msm.run(sizes=tuple(args.sizes))))
        except Exception as e:  # the table is optional context, the comparison above is the point
            print(f"(MSM table unavailable: {type(e).__name__}: {e})")


if __name__ == "__main__":
    main()
