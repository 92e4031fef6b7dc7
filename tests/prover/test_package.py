"""engine.prover's names load lazily, and stay what they were when they loaded eagerly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The submodules first: importing one sets the package's attribute of the same name.
CHECK = """
import engine.prover.setup, engine.prover.verify
from engine import prover
print(prover.verify is sys.modules["engine.prover.verify"].verify, prover.setup is sys.modules["engine.prover.setup"].setup)
"""


def run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "OPENBLAS_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_verify_and_setup_stay_functions_after_their_modules_are_imported() -> None:
    assert run(CHECK) == "True True"


def test_importing_the_package_loads_no_numpy() -> None:
    assert run("import engine.prover\nprint('numpy' in sys.modules)") == "False"


def test_numpy_loaded_after_the_prover_starts_no_blas_threads_to_compete_with_the_kernels() -> None:
    # the interpreter's own threads (the main one) are all that /proc lists
    code = "import engine.prover, numpy, os\nprint(len(os.listdir('/proc/self/task')))"
    assert run(code) == "1"
