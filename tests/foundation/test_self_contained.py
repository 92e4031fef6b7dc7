"""The repository names no file outside itself: a path that only one machine has (a home, a
workspace, a design folder beside the checkout) means nothing to a newcomer's clone."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# A workspace or home directory, or a folder beside the checkout.
OUTSIDE = re.compile(r"(?<![\w.])(/work/|/home/\w|/Users/\w|\.\./shared/)")
# Where such a path is the subject, not a reference.
ALLOWED = {"tests/foundation/test_self_contained.py"}


def test_no_tracked_file_points_at_a_path_outside_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = REPO / name
        if name in ALLOWED or path.suffix in {".png", ".zkey", ".wtns", ".r1cs", ".wasm", ".bin"} or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offenders += [f"{name}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not offenders, "\n".join(offenders)
