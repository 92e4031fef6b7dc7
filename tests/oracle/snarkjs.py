"""The Node oracle: snarkjs and circom2 from tests/oracle/node_modules (`npm ci --prefix tests/oracle`).

Tests call require_snarkjs() first, so they skip with the reason on a machine without Node,
and fail in CI (PROVINGSITE_REQUIRE_SERVICES=1) where the oracle must be present.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import require_service

ORACLE_DIR = Path(__file__).resolve().parent
BIN_DIR = ORACLE_DIR / "node_modules" / ".bin"


def snarkjs_path() -> Path | None:
    p = BIN_DIR / "snarkjs"
    return p if p.exists() and shutil.which("node") else None


def require_snarkjs() -> Path:
    p = snarkjs_path()
    require_service(p is not None, "snarkjs oracle missing: run `npm ci --prefix tests/oracle` (needs Node.js)")
    assert p is not None
    return p


def run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Runs `snarkjs ARGS…`; returns the completed process (callers check returncode/stdout)."""
    exe = require_snarkjs()
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def groth16_verify(vk_json: Path, public_json: Path, proof_json: Path) -> bool:
    """snarkjs's verdict: exit 0 and "OK!" for a valid proof, non-zero for an invalid one."""
    res = run("groth16", "verify", vk_json, public_json, proof_json)
    return res.returncode == 0 and "OK!" in res.stdout
