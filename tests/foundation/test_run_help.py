"""`bin/run --help` answers before any setup: no install, no migration (issue 48, point 4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_help_on_a_fresh_clone_says_the_port_the_address_and_ctrl_c_and_sets_nothing_up(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "bin" / "run", tmp_path / "bin" / "run")  # a clone before bin/setup: no .venv
    result = subprocess.run(["bash", str(tmp_path / "bin" / "run"), "--help"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    assert "PORT=8000" in result.stdout and "HOST=127.0.0.1" in result.stdout
    assert "a second Ctrl-C hands them back and exits at once" in result.stdout
    assert not (tmp_path / ".venv").exists() and not (tmp_path / "data").exists()


def test_help_once_set_up_lists_runengine_s_own_options() -> None:
    result = subprocess.run(["bash", str(ROOT / "bin" / "run"), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--drain-seconds" in result.stdout and "--no-demo" in result.stdout
