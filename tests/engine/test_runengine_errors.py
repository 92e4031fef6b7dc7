"""``manage.py runengine`` refuses what cannot work in one line and a non-zero exit, having
claimed nothing: a port another process holds, a bad setting, a device that is not there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition
from engine.states import PartitionState
from tests.engine.test_runengine import REPO, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def runengine(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "DATABASE_URL": database_url(), "PROVINGSITE_DEVICES": "cpu",
                "PROVINGSITE_SCALE": "tiny", **env}
    return subprocess.run([sys.executable, str(REPO / "manage.py"), "runengine", "--host-name", "refused-host", *args],
                          cwd=REPO, env=full_env, capture_output=True, text=True, timeout=120)


def assert_one_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and all(w in lines[0] for w in words), lines[0]


def test_a_port_already_taken_exits_non_zero_in_one_line_having_claimed_nothing() -> None:
    job, _ = submit_job(kind="porep-c2", job_id="port-taken", inputs={}, num_partitions=1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = runengine("--serve", "--port", str(port))
    assert_one_line(result, f"127.0.0.1:{port}")
    assert Partition.objects.get(job=job).state == PartitionState.PENDING
    assert not EngineHost.objects.filter(name="refused-host", stopped_at__isnull=True).exists()


def test_a_bad_setting_is_named_in_one_line() -> None:
    assert_one_line(runengine("--once", PROVINGSITE_SCALE="huge"), "PROVINGSITE_SCALE", "huge")


def test_a_device_that_is_not_there_is_named_in_one_line() -> None:
    assert_one_line(runengine("--once", PROVINGSITE_DEVICES="cuda:7"), "cuda:7")


def test_with_the_console_a_device_that_is_not_there_still_ends_the_command_in_one_line() -> None:
    # The engine starts behind the console there: its refusal still ends the whole command.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = runengine("--serve", "--port", str(port), PROVINGSITE_DEVICES="cuda:7")
    assert_one_line(result, "cuda:7")
