"""``manage.py runengine`` as an operator runs it: SIGTERM drains in-flight work and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition
from engine.states import PARTITION_LIVE, PartitionState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
P = PartitionState


def database_url() -> str:
    """The test database, as the child process must reach it (SQLite file or PostgreSQL)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out = proc.communicate()[0]
            pytest.fail(f"no {what}; engine output:\n{out[-3000:]}")
        time.sleep(0.1)


def test_sigterm_finishes_in_flight_work_and_exits_zero(engine_params, settings) -> None:
    inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
    job, _ = submit_job(kind="porep-c2", job_id="drain-porep", inputs=inputs, num_partitions=n,
                        circuit_id="porep-c2/tiny", scale="tiny")
    env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_PARAMS_DIR": str(settings.PROVINGSITE["PARAMS_DIR"]),
           "PROVINGSITE_DEVICES": "cpu", "PROVINGSITE_SCALE": "tiny", "PROVINGSITE_HEARTBEAT_SECONDS": "0.5"}
    proc = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "runengine", "--host-name", "drain-host",
                             "--synthesis", "1", "--workers-per-device", "1", "--drain-seconds", "30"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    live = Partition.objects.filter(job=job, state__in=PARTITION_LIVE)
    wait_for(lambda: Partition.objects.filter(job=job, state=P.DONE).exists() and live.exists(), 90,
             "partition in flight", proc)

    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out[-3000:]

    assert not live.exists(), "in-flight work must be finished or handed back"
    assert not Partition.objects.filter(job=job, state=P.PENDING, host__isnull=False).exists()
    assert EngineHost.objects.get(name="drain-host").stopped_at is not None
    assert "engine drain-host stopped" in out and "partitions proved" in out


def _read_until(fd: int, needle: str, timeout: float) -> str:
    """What the terminal shows until ``needle`` appears (or its end, or the timeout)."""
    import select

    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed: every process of the engine has ended
            break
        if not chunk:
            break
        seen += chunk.decode(errors="replace")
    return seen


def test_ctrl_c_in_a_terminal_stops_the_engine_cleanly_without_a_traceback(engine_params, settings) -> None:
    # Ctrl-C signals the terminal's whole process group: the engine and its synthesis processes
    import pty

    env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_PARAMS_DIR": str(settings.PROVINGSITE["PARAMS_DIR"]),
           "PROVINGSITE_DEVICES": "cpu", "PROVINGSITE_SCALE": "tiny", "PYTHONUNBUFFERED": "1"}
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "runengine", "--host-name", "ctrl-c-host",
                             "--synthesis", "2", "--workers-per-device", "1"],
                            cwd=REPO, env=env, stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    try:
        out = _read_until(leader, "engine ctrl-c-host started", 120)
        assert "engine ctrl-c-host started" in out, out[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        out += _read_until(leader, "\0never\0", 60)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the engine was still running 2 minutes after Ctrl-C; it printed:\n{out[-3000:]}")
        assert code == 0, out[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(leader)
    assert "engine ctrl-c-host stopped" in out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
