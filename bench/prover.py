"""Groth16 prover benchmark: `provingsite-prove` vs `manage.py prove` vs `snarkjs groth16 prove`
vs groth16py (PyPI, arkworks; BN254 only) vs a hand-built rapidsnark.

    .venv/bin/python bench/prover.py                  # fixtures + both curves at 2^12 and 2^16
    .venv/bin/python bench/prover.py --sizes 12 --repeat 1 --no-msm
    .venv/bin/python bench/prover.py --rapidsnark ~/rapidsnark/build/prover   # a hand-built one
    .venv/bin/python bench/prover.py --sizes 18 --curves bn128 --no-fixtures --no-snarkjs --rapidsnark ...

Every tool is run as a zk developer would run it, as a command on the same .zkey + .wtns,
timed end to end (start-up, reading, proving, writing proof.json/public.json); runs are
interleaved and the minimum of --repeat is reported, after one untimed warm-up that compiles
the kernels and the bytecode. Every proof written is verified afterwards, by our verifier and
(where it is installed) by snarkjs's `groth16 verify`, the independent one. Our commands'
own self-check (the pairing) is part of their time, as it is in use.

Each run's peak resident set (the kernel's ru_maxrss of the command, from os.wait4 in a small
launcher: see timed) is kept too, and the largest of the timed runs is shown per tool: what a
machine must have free to run that command on that circuit. A mapped file's pages count while
they are mapped and touched, as rapidsnark's mapped zkey does.

The circuits: snarkjs's fixtures (tests/fixtures/snarkjs, 204 signals) and synthetic R1CSs
(engine.prover.setup.synthetic_circuit) filling a 2^k domain, whose keys come from OUR
development setup (snarkjs's own phase-2 preparation at 2^16 takes ~25 min); the other
tools prove with that .zkey unchanged. snarkjs needs `npm ci --prefix tests/oracle`;
groth16py `pip install groth16py` into this venv (it imports the .zkey and proves the .wtns,
both timed, as its command would; its Ethereum proof blob is turned into proof.json and
verified against our public.json, the same signals).

Python children get a bytecode cache in a temporary directory, as an installed package has
(this workspace sets PYTHONDONTWRITEBYTECODE, which would charge both Python commands for
compiling our modules on every run). Ends with the kernels' MSM table unless --no-msm.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._table import markdown_table  # noqa: E402
from engine.prover.backends.cpu import native  # noqa: E402
from engine.prover.keys import VerifyingKey  # noqa: E402
from engine.prover.setup import setup, synthetic_circuit  # noqa: E402
from engine.prover.snarkjs import (  # noqa: E402
    read_proof_json,
    read_public_json,
    read_r1cs,
    read_vk_json,
    write_vk_json,
    write_wtns,
    write_zkey,
)
from engine.prover.verify import verify  # noqa: E402

SNARKJS = REPO / "tests" / "oracle" / "node_modules" / ".bin" / "snarkjs"
FIXTURES = REPO / "tests" / "fixtures" / "snarkjs"
CLI = "provingsite-prove"
MANAGE = "manage.py prove"

# A tool is how to prove: argv from (zkey, wtns, proof.json, public.json).
Argv = Callable[[Path, Path, Path, Path], list[str]]


def cli_command() -> list[str]:
    """The installed console script, as a developer runs it; without an install, -m runs the same
    `engine.prover.cli:main` (a few milliseconds more: runpy)."""
    script = Path(sys.executable).parent / CLI
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.prover.cli"]


def cli_argv(*paths: Path) -> list[str]:
    return [*cli_command(), *map(str, paths), "--device", "cpu"]


def manage_argv(*paths: Path) -> list[str]:
    return [sys.executable, str(REPO / "manage.py"), "prove", *map(str, paths), "--device", "cpu"]


def snarkjs_argv(*paths: Path) -> list[str]:
    return [str(SNARKJS), "groth16", "prove", *map(str, paths)]


GROTH16PY = "groth16py"
_GROTH16PY_CHILD = r"""
import json, sys
import groth16py
zkey, wtns, proof_path = sys.argv[1:4]
pk, _ = groth16py.import_zkey(zkey)
blob = groth16py.prove_wtns(pk, wtns)  # Ethereum order: a.x a.y b.x1 b.x0 b.y1 b.y0 c.x c.y
v = [str(int.from_bytes(blob[i:i + 32], "big")) for i in range(0, 256, 32)]
proof = {"pi_a": [v[0], v[1], "1"], "pi_b": [[v[3], v[2]], [v[5], v[4]], ["1", "0"]], "pi_c": [v[6], v[7], "1"],
         "protocol": "groth16", "curve": "bn128"}
with open(proof_path, "w") as f:
    json.dump(proof, f)
"""


def groth16py_argv(zkey: Path, wtns: Path, proof: Path, public: Path) -> list[str]:
    return [sys.executable, "-c", _GROTH16PY_CHILD, str(zkey), str(wtns), str(proof)]


def groth16py_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("groth16py") is not None


def rapidsnark_argv(binary: Path) -> Argv:
    return lambda *paths: [str(binary), *map(str, paths)]


@dataclass
class Circuit:
    name: str
    curve: str
    constraints: int
    zkey: Path
    wtns: Path
    vk: VerifyingKey


@dataclass
class Row:
    circuit: Circuit
    seconds: dict[str, float] = field(default_factory=dict)
    peak_mb: dict[str, float] = field(default_factory=dict)  # the largest peak RSS of the timed runs
    valid: dict[str, bool] = field(default_factory=dict)
    phases: str = ""  # what our command printed about its own steps


def child_env(pyc_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pyc_dir)
    # the console script imports the package where the venv installed it (editable: perhaps
    # another checkout); this checkout's code is what is measured
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@dataclass
class Run:
    seconds: float
    stderr: str
    peak_mb: float  # the command's peak resident set (ru_maxrss), in MB of 10^6 bytes


# Each command is started by a small Python of its own (no site: about 6 MB) that forks it,
# times it and reaps it with os.wait4. Forked from this process instead (numpy, the keys'
# setup), a command would report this process's resident set as the floor of its own peak:
# Linux carries the peak from before exec over into the child's ru_maxrss. The launcher's own
# start-up is outside the time it reports.
_LAUNCHER = """
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
with open(report, "w") as f:
    f.write(f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def timed(argv: list[str], env: dict[str, str]) -> Run:
    """One run of a command: its wall time, its stderr and its peak RSS (the launcher's ~6 MB
    is a floor under the last: a command that never grows past it reads as the floor)."""
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "run"
        res = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, str(report), *argv], capture_output=True,
                             text=True, cwd=REPO, env=env, timeout=1800)
        seconds, maxrss_kb, code = report.read_text().split() if report.exists() else ("0", "0", "-1")
    if res.returncode != 0 or int(code) != 0:
        raise RuntimeError(f"{argv[:3]} failed ({code}): {res.stderr[-2000:]}")
    return Run(float(seconds), res.stderr, int(maxrss_kb) * 1024 / 1e6)  # Linux reports kilobytes


def fixture_circuits() -> list[Circuit]:
    out = []
    for curve in ("bn128", "bls12381"):
        d = FIXTURES / curve
        r1cs = read_r1cs(d / "circuit.r1cs")
        out.append(Circuit(f"fixture {curve}", curve, len(r1cs.a.row_ptr) - 1, d / "circuit.zkey", d / "witness.wtns",
                           read_vk_json(d / "verification_key.json")))
    return out


def synthetic(curve: str, log_n: int, work: Path) -> Circuit:
    n_public = 2
    m = (1 << log_n) - n_public - 1  # fills the 2^log_n domain exactly
    r1cs, w = synthetic_circuit(curve, m, n_public=n_public, seed=log_n)
    t = time.perf_counter()
    pk, vk = setup(r1cs, seed=f"bench-{curve}-{log_n}")
    print(f"  setup {curve} 2^{log_n}: {time.perf_counter() - t:.1f} s", flush=True)
    zkey, wtns = work / f"{curve}-{log_n}.zkey", work / f"{curve}-{log_n}.wtns"
    write_zkey(zkey, pk)
    write_wtns(wtns, curve, w)
    return Circuit(f"2^{log_n}", curve, m, zkey, wtns, vk)


def bench_circuit(c: Circuit, tools: dict[str, Argv], repeat: int, work: Path, env: dict[str, str]) -> Row:
    row = Row(c)
    outs = {name: (work / f"{i}.proof.json", work / f"{i}.public.json") for i, name in enumerate(tools)}
    for name, argv in tools.items():  # warm-up: kernels compiled, bytecode cached, files in the page cache
        timed(argv(c.zkey, c.wtns, *outs[name]), env)
    for _ in range(repeat):
        for name, argv in tools.items():  # interleaved, so load from the other engineers hits every tool alike
            run = timed(argv(c.zkey, c.wtns, *outs[name]), env)
            row.peak_mb[name] = max(run.peak_mb, row.peak_mb.get(name, 0.0))
            if run.seconds < row.seconds.get(name, float("inf")):
                row.seconds[name] = run.seconds
                if name == CLI:
                    found = re.search(r"load .*", run.stderr)
                    row.phases = found.group(0) if found else ""
    vk_json = work / "verification_key.json"
    write_vk_json(vk_json, c.vk)
    for name, (proof, public) in outs.items():
        # groth16py writes no public.json: it proves the same witness, so ours is its public
        public = outs[CLI][1] if name == GROTH16PY else public
        ours = verify(c.vk, read_proof_json(proof, c.vk.curve), read_public_json(public))
        row.valid[name] = ours and snarkjs_verifies(vk_json, public, proof, env) is not False
    return row


def snarkjs_installed() -> bool:
    return SNARKJS.exists() and shutil.which("node") is not None


def snarkjs_verifies(vk_json: Path, public: Path, proof: Path, env: dict[str, str]) -> bool | None:
    """The independent verifier's word on a proof (None where snarkjs is not installed)."""
    if not snarkjs_installed():
        return None
    res = subprocess.run([str(SNARKJS), "groth16", "verify", str(vk_json), str(public), str(proof)],
                         capture_output=True, text=True, env=env, timeout=600)
    return res.returncode == 0 and "OK" in res.stdout


def startup(repeat: int, env: dict[str, str]) -> dict[str, float]:
    """`--help` of both Python commands: what a developer waits for before any proving starts."""
    argvs = {CLI: [*cli_command(), "--help"],
             MANAGE: [sys.executable, str(REPO / "manage.py"), "prove", "--help"]}
    for argv in argvs.values():
        timed(argv, env)
    best = {name: float("inf") for name in argvs}
    for _ in range(max(repeat, 3)):
        for name, argv in argvs.items():
            best[name] = min(best[name], timed(argv, env).seconds)
    return best


def ratio(numerator: float | None, denominator: float | None) -> str:
    return "n/a" if numerator is None or denominator is None else f"{numerator / denominator:.1f}x"


def ours_over(r: Row, other: str, figures: dict[str, float]) -> str:
    """ours / ``other`` (the acceptance's way round: below 1 is ours smaller), to two places."""
    mine, theirs = figures.get(CLI), figures.get(other)
    return "n/a" if mine is None or theirs is None else f"{mine / theirs:.2f}"


def format_table(rows: list[Row], tools: list[str]) -> str:
    others = [t for t in tools if t != CLI]
    header = ("curve", "circuit", "constraints", *(f"{t} (s)" for t in tools), *(f"{t} / ours" for t in others),
              *(f"{t} peak RSS (MB)" for t in tools), "ours / rapidsnark: time", "ours / rapidsnark: peak RSS",
              "ours: phases", "proofs verify")
    return markdown_table(
        header,
        (
            (
                r.circuit.curve,
                r.circuit.name,
                f"{r.circuit.constraints:,}",
                *(f"{r.seconds[t]:.2f}" if t in r.seconds else "n/a" for t in tools),
                *(ratio(r.seconds.get(t), r.seconds.get(CLI)) for t in others),
                *(f"{r.peak_mb[t]:.0f}" if t in r.peak_mb else "n/a" for t in tools),
                ours_over(r, "rapidsnark", r.seconds),
                ours_over(r, "rapidsnark", r.peak_mb),
                r.phases,
                "all" if all(r.valid.values()) else ", ".join(f"{t} {ok}" for t, ok in r.valid.items()),
            )
            for r in rows
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[12, 16], help="log2 of the synthetic domains")
    ap.add_argument("--curves", nargs="+", default=["bn128", "bls12381"])
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool (the minimum is shown)")
    ap.add_argument("--no-fixtures", action="store_true", help="skip snarkjs's small fixture circuits")
    ap.add_argument("--rapidsnark", type=Path, default=None, help="a hand-built rapidsnark `prover` (BN254 only)")
    ap.add_argument("--no-msm", action="store_true", help="skip the kernels' MSM table")
    ap.add_argument("--no-manage", action="store_true", help="skip `manage.py prove` (Django's start-up)")
    ap.add_argument("--no-snarkjs", action="store_true", help="skip snarkjs (minutes a run at 2^18)")
    args = ap.parse_args()

    tools: dict[str, Argv] = {CLI: cli_argv}
    if not args.no_manage:
        tools[MANAGE] = manage_argv
    if not args.no_snarkjs and snarkjs_installed():
        tools["snarkjs"] = snarkjs_argv
    snarkjs = SNARKJS if "snarkjs" in tools else "missing (npm ci --prefix tests/oracle)"
    g16 = groth16py_available()
    print(f"cores: {native.default_threads()}; kernels: {native.select_isa()}; snarkjs: {snarkjs}; "
          f"groth16py: {'installed' if g16 else 'missing (pip install groth16py)'}; "
          f"rapidsnark: {args.rapidsnark or 'not given'}; min of {args.repeat}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        env = child_env(work / "pyc")
        began = startup(args.repeat, env)
        print()
        print(markdown_table(("command", "`--help` (s)", "vs ours"),
                             ((name, f"{s:.3f}", ratio(s, began[CLI])) for name, s in began.items())))
        print(flush=True)
        circuits = [] if args.no_fixtures else [c for c in fixture_circuits() if c.curve in args.curves]
        circuits += [synthetic(curve, log_n, work) for curve in args.curves for log_n in args.sizes]
        # every row in the final table's columns, so the progress lines read under its header
        names = list(tools) + ([GROTH16PY] if g16 else []) + (["rapidsnark"] if args.rapidsnark is not None else [])
        for c in circuits:
            row_tools = dict(tools)
            if g16 and c.curve == "bn128":
                row_tools[GROTH16PY] = groth16py_argv
            if args.rapidsnark is not None and c.curve == "bn128":
                row_tools["rapidsnark"] = rapidsnark_argv(args.rapidsnark)
            rows.append(bench_circuit(c, row_tools, args.repeat, work, env))
            print(format_table(rows[-1:], names).splitlines()[-1], flush=True)
    print()
    print(format_table(rows, names))
    if not args.no_msm:
        try:
            from bench import msm  # the kernels engineer's MSM benchmark

            print()
            print(msm.format_table(msm.run(sizes=tuple(args.sizes))))
        except Exception as e:  # the table is optional context, the comparison above is the point
            print(f"(MSM table unavailable: {type(e).__name__}: {e})")


if __name__ == "__main__":
    main()
