"""manage.py prove: rapidsnark-like CLI over snarkjs files (exit 0 and files, or a clear error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from engine.prover.snarkjs import read_proof_json, read_public_json, read_vk_json, read_wtns, write_wtns
from engine.prover.verify import verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
REPO = Path(__file__).resolve().parents[2]


def test_prove_writes_snarkjs_files(tmp_path: Path) -> None:
    d = FIXTURES / "bls12381"
    call_command(
        "prove",
        str(d / "circuit.zkey"),
        str(d / "witness.wtns"),
        str(tmp_path / "proof.json"),
        str(tmp_path / "public.json"),
        "--device",
        "cpu",
        "--r1cs",
        str(d / "circuit.r1cs"),
    )
    proof = read_proof_json(tmp_path / "proof.json")
    pub = read_public_json(tmp_path / "public.json")
    assert json.loads((tmp_path / "public.json").read_text()) == json.loads((d / "public.json").read_text())
    assert json.loads((tmp_path / "proof.json").read_text())["curve"] == "bls12381"
    assert verify(read_vk_json(d / "verification_key.json"), proof, pub)


def test_bad_inputs_are_clear_errors(tmp_path: Path) -> None:
    d = FIXTURES / "bls12381"
    out = [str(tmp_path / "p.json"), str(tmp_path / "q.json")]
    with pytest.raises(CommandError, match="no such file"):
        call_command("prove", str(tmp_path / "missing.zkey"), str(d / "witness.wtns"), *out)
    with pytest.raises(CommandError, match="bad input file: proof.json: is not a snarkjs .wtns file"):
        call_command("prove", str(d / "circuit.zkey"), str(d / "proof.json"), *out)
    with pytest.raises(CommandError, match="witness is over bn128"):
        call_command("prove", str(d / "circuit.zkey"), str(FIXTURES / "bn128" / "witness.wtns"), *out)
    with pytest.raises(CommandError, match="unknown device"):
        call_command("prove", str(d / "circuit.zkey"), str(d / "witness.wtns"), *out, "--device", "tpu")
    # a witness that does not satisfy the circuit: caught row by row with --r1cs, and by the
    # proof's own verification without it; nothing is written either way
    w = read_wtns(d / "witness.wtns")
    w[150, 0] ^= 1
    write_wtns(tmp_path / "bad.wtns", "bls12381", w)
    with pytest.raises(CommandError, match=r"does not satisfy the circuit: constraint \d+ not satisfied"):
        call_command(
            "prove", str(d / "circuit.zkey"), str(tmp_path / "bad.wtns"), *out, "--r1cs", str(d / "circuit.r1cs")
        )
    with pytest.raises(CommandError, match="does not satisfy the circuit: the proof failed verification"):
        call_command("prove", str(d / "circuit.zkey"), str(tmp_path / "bad.wtns"), *out)
    assert not (tmp_path / "p.json").exists()


def prove_in_a_shell(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "manage.py"), "prove", *map(str, paths)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.slow
def test_exit_status_from_the_shell(tmp_path: Path) -> None:
    d = FIXTURES / "bls12381"
    ok = prove_in_a_shell(d / "circuit.zkey", d / "witness.wtns", tmp_path / "p.json", tmp_path / "q.json")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "p.json").exists() and "verified" in ok.stderr
    bad = prove_in_a_shell(d / "witness.wtns", d / "witness.wtns", tmp_path / "x.json", tmp_path / "y.json")
    assert bad.returncode != 0 and "not a snarkjs .zkey file" in bad.stderr and "Traceback" not in bad.stderr
