"""``kill -9`` of ``manage.py runengine`` takes its synthesis processes down with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.test_runengine import REPO, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
SYNTHESIS = 2


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, read from /proc (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended while we looked
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def descendants_of(pid: int) -> list[int]:
    kids = children_of(pid)
    return kids + [d for kid in kids for d in descendants_of(kid)]


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running or stopped, not gone and not a zombie waiting for a reaper."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
def test_sigkill_of_the_engine_leaves_no_process_behind(engine_params, settings) -> None:
    env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_PARAMS_DIR": str(settings.PROVINGSITE["PARAMS_DIR"]),
           "PROVINGSITE_DEVICES": "cpu", "PROVINGSITE_SCALE": "tiny"}
    engine = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "runengine", "--host-name", "orphan-host",
                               "--synthesis", str(SYNTHESIS), "--workers-per-device", "1"],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    left_behind: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while sum("spawn_main" in cmdline(p) for p in children_of(engine.pid)) < SYNTHESIS:
            assert engine.poll() is None and time.monotonic() < deadline, "the engine never started its pool"
            time.sleep(0.1)
        left_behind = descendants_of(engine.pid)

        engine.send_signal(signal.SIGKILL)
        engine.wait(timeout=10)

        deadline = time.monotonic() + 5
        while any(alive(p) for p in left_behind) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [cmdline(p) for p in left_behind if alive(p)] == []
    finally:
        engine.kill()
        for pid in left_behind or descendants_of(engine.pid):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
