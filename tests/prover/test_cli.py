"""provingsite-prove: the prover's own command line, with `manage.py prove` as its alias."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.management.commands.prove import Command as ManagePyProve
from engine.prover import cli
from engine.prover.snarkjs import read_proof_json, read_public_json, read_vk_json
from engine.prover.verify import verify
from tests.oracle import snarkjs as oracle
from tests.oracle.circom import CircomBuild, circom_product  # noqa: F401  the session fixture

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
REPO = Path(__file__).resolve().parents[2]
HEAVY = ("django", "numpy", "cffi", "py_ecc", "py_arkworks_bls12381", "cupy")


def run_cli(*args: str | Path, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m engine.prover.cli ARGS` as a shell would run it, without Django's settings."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "engine.prover.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def imported_modules(importtime_stderr: str, *, whole_names: bool = False) -> set[str]:
    """The top-level packages (or whole module names) in `python -X importtime`'s report."""
    rows = (line.split("|")[-1].strip() for line in importtime_stderr.splitlines() if line.startswith("import time:"))
    return {row if whole_names else row.split(".")[0] for row in rows}


@pytest.mark.node
@pytest.mark.slow
@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_the_cli_writes_a_proof_snarkjs_accepts(curve: str, tmp_path: Path) -> None:
    oracle.require_snarkjs()
    d = FIXTURES / curve
    status = cli.main([str(d / "circuit.zkey"), str(d / "witness.wtns"), str(tmp_path / "proof.json"),
                       str(tmp_path / "public.json"), "--device", "cpu"])
    assert status == 0
    assert json.loads((tmp_path / "public.json").read_text()) == json.loads((d / "public.json").read_text())
    assert oracle.groth16_verify(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")


def test_help_loads_neither_django_nor_the_numeric_stack() -> None:
    res = run_cli("--help", importtime=True)
    assert res.returncode == 0 and "usage: provingsite-prove" in res.stdout
    assert imported_modules(res.stderr).isdisjoint(HEAVY)


def test_a_cpu_proof_loads_neither_django_nor_the_numeric_stack(tmp_path: Path) -> None:
    """A .zkey and a .wtns on the CPU go through the engine's one orchestration over the mapped
    key, with no numpy: the command's start-up is the standard library's, and the proof it
    writes verifies."""
    d = FIXTURES / "bn128"
    res = run_cli(d / "circuit.zkey", d / "witness.wtns", tmp_path / "proof.json", tmp_path / "public.json",
                  "--device", "cpu", importtime=True)
    assert res.returncode == 0, res.stderr
    assert imported_modules(res.stderr).isdisjoint(HEAVY)
    assert "engine.prover.groth16" in imported_modules(res.stderr, whole_names=True)
    assert json.loads((tmp_path / "public.json").read_text()) == json.loads((d / "public.json").read_text())
    vk = read_vk_json(d / "verification_key.json")
    assert verify(vk, read_proof_json(tmp_path / "proof.json"), read_public_json(tmp_path / "public.json"))


def test_choosing_the_device_without_an_nvidia_driver_does_not_import_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.prover as prover
    from engine.prover.backends import driver
    from engine.prover.config import current, using

    monkeypatch.setattr(driver, "NVIDIA_DRIVER_PATHS", (str(REPO / "no-such-device"),))
    monkeypatch.setitem(sys.modules, "cupy", None)  # importing it would now raise
    with using(current().but(device="auto")):
        assert prover.select_device() == "cpu"


def test_a_bad_input_exits_1_with_the_reason_and_no_traceback(tmp_path: Path) -> None:
    d = FIXTURES / "bls12381"
    res = run_cli(d / "witness.wtns", d / "witness.wtns", tmp_path / "p.json", tmp_path / "q.json")
    assert res.returncode == 1
    assert "error: bad input file" in res.stderr and "not a snarkjs .zkey file" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "p.json").exists()


def test_pyproject_declares_the_console_script() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["provingsite-prove"].partition(":")
    assert getattr(importlib.import_module(module), name) is cli.console_main


def test_manage_py_prove_takes_the_same_arguments() -> None:
    def options(parser) -> set[tuple[str, ...]]:
        return {tuple(a.option_strings) or (a.dest,) for a in parser._actions}

    django_parser = ManagePyProve().create_parser("manage.py", "prove")
    assert options(cli.build_parser()) <= options(django_parser)


@pytest.mark.node
@pytest.mark.slow
@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_the_cli_proves_from_circom_inputs_with_wasm_in_place_of_a_witness(
        curve: str, tmp_path: Path, circom_product: Callable[[str], CircomBuild]) -> None:  # noqa: F811
    built = circom_product(curve)
    (tmp_path / "input.json").write_text(json.dumps({"a": "3", "b": ["4", "5"]}))
    exported = oracle.run("zkey", "export", "verificationkey", built.zkey, tmp_path / "vk.json")
    assert exported.returncode == 0, exported.stderr
    status = cli.main([str(built.zkey), "--wasm", str(built.wasm), "--input", str(tmp_path / "input.json"),
                       str(tmp_path / "proof.json"), str(tmp_path / "public.json"), "--device", "cpu"])
    assert status == 0
    assert json.loads((tmp_path / "public.json").read_text()) == ["60", "3"]  # c = 3·4·5, then a
    assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")


def test_wasm_needs_input_and_then_only_the_two_output_files(tmp_path: Path) -> None:
    with pytest.raises(cli.ProveError, match="go together"):
        cli.split_files([tmp_path / "p.json", tmp_path / "q.json"], tmp_path / "c.wasm", None)
    with pytest.raises(cli.ProveError, match="expected proof.json public.json"):
        cli.split_files([tmp_path / "w.wtns", tmp_path / "p.json", tmp_path / "q.json"], tmp_path / "c.wasm",
                        tmp_path / "i.json")
