"""Every command that reads or writes the records, run against a database not yet migrated,
says so in one line naming the fix, instead of a traceback from the first missing table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.test_runengine import REPO

pytestmark = pytest.mark.slow

COMMANDS = [
    ["setupkeys", "--kind", "winning-post", "--scale", "tiny"],
    ["keys", "list"],
    ["jobs"],
    ["submitjob", "winning-post", "w-1", "--sector-seed", "11" * 32, "--randomness", "2a" * 32],
    ["canceljob", "w-1"],
    ["createtoken", "someone"],
    ["runengine", "--once"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_command_on_an_unmigrated_database_names_the_fix_in_one_line(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(PROVINGSITE_DATA_DIR=str(tmp_path), PROVINGSITE_DEVICES="cpu")
    result = subprocess.run([sys.executable, str(REPO / "manage.py"), *command], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "not migrated" in lines[0] and "manage.py migrate" in lines[0], lines[0]
