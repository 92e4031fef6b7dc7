"""engine.prover's names load lazily, and stay what they were when they loaded eagerly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A name of the package is a module or a function, never one standing in for the other: the
# package's class is the plain module type (no __setattr__ swapping modules for functions).
CHECK = """
import types
from engine import prover
import engine.prover.setup, engine.prover.verify
print(type(prover) is types.ModuleType, prover.verify is sys.modules["engine.prover.verify"],
      prover.setup is sys.modules["engine.prover.setup"], callable(prover.verify.verify))
"""


def run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "OPENBLAS_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_setup_and_verify_are_modules_of_a_plain_package() -> None:
    assert run(CHECK) == "True True True True"


def test_importing_the_package_loads_no_numpy() -> None:
    assert run("import engine.prover\nprint('numpy' in sys.modules)") == "False"


def test_importing_the_package_leaves_the_processs_environment_alone() -> None:
    assert run("import os, engine.prover\nprint(os.environ.get('OPENBLAS_NUM_THREADS'))") == "None"


def test_numpy_loaded_after_an_application_starts_runs_no_blas_threads_to_compete_with_the_kernels() -> None:
    # the interpreter's own threads (the main one) are all that /proc lists
    threads = "import numpy, os\nprint(len(os.listdir('/proc/self/task')))"
    assert run(f"from engine.prover.config import process_defaults\nprocess_defaults()\n{threads}") == "1"
    django_settings = "import os\nos.environ['DJANGO_SETTINGS_MODULE'] = 'provingsite.settings'\nimport django\ndjango.setup()\n"
    assert run(django_settings + threads) == "1"
