"""`bin/run`'s engine: demo jobs only into an empty database, none with --no-demo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.models import ProofJob
from engine.states import JobState
from tests.engine.test_runengine import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def runengine(settings, *args: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_PARAMS_DIR": str(settings.PROVINGSITE["PARAMS_DIR"]),
           "PROVINGSITE_DEVICES": "cpu", "PROVINGSITE_SCALE": "tiny"}
    return subprocess.Popen([sys.executable, str(REPO / "manage.py"), "runengine", "--host-name", "demo-host",
                             "--synthesis", "1", "--workers-per-device", "1", "--drain-seconds", "0", *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_demo_jobs_go_into_an_empty_database_even_with_a_sigterm_as_they_arrive(settings) -> None:
    proc = runengine(settings, "--demo")
    deadline = time.monotonic() + 120
    while not ProofJob.objects.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # the first demo job is in: the engine drains, not dies
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out[-3000:]
    assert "submitted 4 demo job(s)" in out, out[-3000:]
    assert ProofJob.objects.filter(job_id__startswith="demo-").count() == 4


def test_a_database_with_jobs_gets_no_demo_jobs(settings) -> None:
    ProofJob.objects.create(job_id="history-1", kind="winning-post", state=JobState.CANCELLED)
    proc = runengine(settings, "--demo", "--once")
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out[-3000:]
    assert "the database already holds jobs: no demo jobs added" in out
    assert list(ProofJob.objects.values_list("job_id", flat=True)) == ["history-1"]


def test_no_demo_after_demo_turns_them_off(settings) -> None:
    # bin/run passes --demo before the operator's own arguments: `bin/run --no-demo` must win.
    proc = runengine(settings, "--demo", "--no-demo", "--once")
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out[-3000:]
    assert ProofJob.objects.count() == 0
