"""``manage.py runengine`` as an operator runs it: SIGTERM drains in-flight work and exits 0."""

from __future__ import annotations

import contextlib
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
    # A line per claim and per proof goes to the job's page, not the engine's own log (at info)
    assert "claimed P" not in out and "proved P" not in out, out[-3000:]


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


def in_a_terminal(settings, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """``manage.py runengine *args`` in a terminal of its own (a session leader, as a shell runs
    it); the process, and the terminal's end this test reads."""
    import pty

    env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_PARAMS_DIR": str(settings.PROVINGSITE["PARAMS_DIR"]),
           "PROVINGSITE_DEVICES": "cpu", "PROVINGSITE_SCALE": "tiny", "PYTHONUNBUFFERED": "1"}
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "runengine", *args],
                            cwd=REPO, env=env, stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    return proc, leader


def test_ctrl_c_in_a_terminal_stops_the_engine_cleanly_without_a_traceback(engine_params, settings) -> None:
    # Ctrl-C signals the terminal's whole process group: the engine and its synthesis processes
    proc, leader = in_a_terminal(settings, "--host-name", "ctrl-c-host", "--synthesis", "2", "--workers-per-device", "1")
    try:
        out = _read_until(leader, "engine ctrl-c-host started", 120)
        assert "engine ctrl-c-host started" in out, out[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        out += _read_until(leader, "again to stop now", 10)
        assert "stopping: finishing 0 partition(s)" in out and "Ctrl-C again to stop now" in out, out[-3000:]
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


def _synthesis_processes(pid: int) -> list[int]:
    """The engine's own children but multiprocessing's resource tracker."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() != str(pid):
            continue
        with contextlib.suppress(OSError):
            if b"resource_tracker" not in (status.parent / "cmdline").read_bytes():
                found.append(int(status.parent.name))
    return found


def test_a_second_ctrl_c_hands_everything_back_and_exits_at_once(engine_params, settings) -> None:
    # Synthesis is frozen (SIGSTOP) so the drain could never finish: only the second Ctrl-C ends it.
    proc, leader = in_a_terminal(settings, "--host-name", "hurry-host", "--synthesis", "1", "--workers-per-device", "1",
                                 "--drain-seconds", "600")
    frozen = []
    try:
        out = _read_until(leader, "engine hurry-host started", 120)
        assert "engine hurry-host started" in out, out[-3000:]
        frozen = _synthesis_processes(proc.pid)
        assert frozen, "the engine starts its synthesis processes before it says it started"
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
        job, _ = submit_job(kind="porep-c2", job_id="hurry-porep", inputs=inputs, num_partitions=n,
                            circuit_id="porep-c2/tiny", scale="tiny")
        live = Partition.objects.filter(job=job, state__in=PARTITION_LIVE)
        wait_for(lambda: live.exists(), 60, "partition in flight", proc)
        os.kill(proc.pid, signal.SIGINT)
        out += _read_until(leader, "again to stop now", 10)
        assert "Ctrl-C again to stop now" in out, out[-3000:]
        asked = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the engine was still running 30 s after a second Ctrl-C; it printed:\n{out[-3000:]}")
        took = time.monotonic() - asked
        out += _read_until(leader, "\0never\0", 2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in frozen:  # were they left behind, they must not stay frozen
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os.close(leader)
    assert code == 130, out[-3000:]
    assert took < 15, f"exit took {took:.1f}s"
    assert "stopping now: handing back" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert not live.exists(), "every partition it held is back in the queue"
    assert EngineHost.objects.get(name="hurry-host").stopped_at is not None
    assert not [pid for pid in frozen if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:"))
    except (OSError, StopIteration):
        return "Z"
