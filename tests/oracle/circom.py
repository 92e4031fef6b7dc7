"""A circom circuit built at test time: circom2 compiles it, snarkjs runs a tiny ceremony.

Powers of tau at 2^4 and one zkey contribution take seconds on either curve, so tests can
build their own circuit instead of relying on committed keys.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.oracle.snarkjs import BIN_DIR, require_snarkjs
from tests.oracle.snarkjs import run as snarkjs

# a is public, b a private array; c = a·b[0]·b[1]; the circuit refuses a = 7.
PRODUCT = """pragma circom 2.0.0;
template Product() {
    signal input a;
    signal input b[2];
    signal output c;
    signal t;
    t <== a * b[0];
    c <== t * b[1];
    assert(a != 7);
}
component main {public [a]} = Product();
"""
POWER = 4  # 2^4 >= nConstraints + nPublic + 1 for PRODUCT


@dataclass(frozen=True)
class CircomBuild:
    curve: str
    zkey: Path
    wasm: Path
    r1cs: Path
    sym: Path
    folder: Path


def _ok(res: subprocess.CompletedProcess[str], what: str) -> None:
    assert res.returncode == 0, f"{what} failed: {res.stdout[-2000:]} {res.stderr[-2000:]}"


def build(folder: Path, curve: str, source: str = PRODUCT, name: str = "product") -> CircomBuild:
    """Compile ``source`` for ``curve`` (bn128 or bls12381) and make its Groth16 zkey in ``folder``."""
    require_snarkjs()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.circom").write_text(source)
    _ok(subprocess.run([str(BIN_DIR / "circom2"), f"{name}.circom", "--r1cs", "--wasm", "--sym", "--prime", curve, "-o", "."],
                       cwd=folder, capture_output=True, text=True, timeout=120), "circom2")
    steps = [
        ("powersoftau", "new", curve, str(POWER), folder / "pot0.ptau"),
        ("powersoftau", "contribute", folder / "pot0.ptau", folder / "pot1.ptau", "--name=test", "-e=provingsite test"),
        ("powersoftau", "prepare", "phase2", folder / "pot1.ptau", folder / "final.ptau"),
        ("groth16", "setup", folder / f"{name}.r1cs", folder / "final.ptau", folder / "c0.zkey"),
        ("zkey", "contribute", folder / "c0.zkey", folder / f"{name}.zkey", "--name=test", "-e=provingsite zkey"),
    ]
    for step in steps:
        _ok(snarkjs(*step), " ".join(map(str, step[:2])))
    return CircomBuild(curve, folder / f"{name}.zkey", folder / f"{name}_js" / f"{name}.wasm", folder / f"{name}.r1cs",
                       folder / f"{name}.sym", folder)


_BUILT: dict[str, CircomBuild] = {}


@pytest.fixture(scope="session")
def circom_product(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], CircomBuild]:
    """PRODUCT built for a curve, once per test session however many modules ask."""

    def built(curve: str) -> CircomBuild:
        if curve not in _BUILT:
            _BUILT[curve] = build(tmp_path_factory.mktemp(f"circom-{curve}"), curve)
        return _BUILT[curve]

    return built
