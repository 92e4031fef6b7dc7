"""The command line's prover reads a key in place: the zkey is mapped, the kernels read its
points where they lie and give each section back once its MSM has been planned, so what a
proof holds follows the few MSMs alive at once, not the key read into memory and then copied
again (about three times the key's size, before)."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

from engine.prover import zkey_prover
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.snarkjs import write_wtns, write_zkey

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "snarkjs" / "bn128"
# The command on two of the cores it may use (the kernels keep one more MSM alive on many),
# forked by a small Python of its own: forked from pytest, its peak would start from pytest's
# resident set, which Linux carries over exec into the child's ru_maxrss.
PINNED_COMMAND = (
    "import os, sys; os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2]); "
    "from engine.prover.cli import main; sys.exit(main(sys.argv[1:]))"
)
LAUNCHER = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
)


def key_filling(log_domain: int, tmp_path: Path) -> tuple[Path, Path]:
    """A key and witness whose circuit fills a 2^log_domain domain (the benchmark's shape)."""
    r1cs, w = synthetic_circuit("bn128", (1 << log_domain) - 3, n_public=2, seed=log_domain)
    pk, _ = setup(r1cs, seed="zkey-memory")
    write_zkey(tmp_path / "c.zkey", pk)
    write_wtns(tmp_path / "w.wtns", "bn128", w)
    return tmp_path / "c.zkey", tmp_path / "w.wtns"


def peak_rss_bytes(zkey: Path, wtns: Path, out: Path) -> int:
    """The command's peak resident set, proving zkey + wtns in a process of its own."""
    argv = [sys.executable, "-S", "-c", LAUNCHER, "-c", PINNED_COMMAND, str(zkey), str(wtns),
            str(out / "proof.json"), str(out / "public.json"), "--device", "cpu"]
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
    code, maxrss_kb = res.stdout.split()
    assert code == "0", f"the command proves the key: {res.stderr}"
    return int(maxrss_kb) * 1024  # Linux reports kilobytes


def test_reading_and_proving_copies_none_of_the_key_into_python(tmp_path: Path) -> None:
    zkey, wtns = key_filling(10, tmp_path)
    zkey_prover.prove(zkey_prover.read_inputs(zkey, wtns))  # the kernels loaded before counting
    tracemalloc.start()
    try:
        zkey_prover.prove(zkey_prover.read_inputs(zkey, wtns))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < zkey.stat().st_size / 4  # the witness and small change; the key was read whole before


def test_the_command_holds_less_than_twice_the_key_above_its_own_start(tmp_path: Path) -> None:
    """The margin is wide on purpose: about 1.5 times the key now, 2.9 times before."""
    zkey, wtns = key_filling(14, tmp_path)
    start = peak_rss_bytes(FIXTURE / "circuit.zkey", FIXTURE / "witness.wtns", tmp_path)
    assert peak_rss_bytes(zkey, wtns, tmp_path) - start < 2 * zkey.stat().st_size
