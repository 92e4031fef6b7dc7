"""A registered circuit's witness generator is the client's code: it runs in the engine's
synthesis processes on budgets, never in a web request. A generator whose ``init`` never
returns, or grows its memory page after page, costs the API nothing: the submission answers at
once, other requests stay quick, the server's processes grow little, and the job fails with
the reason well within two minutes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.models import ProofJob
from engine.pipeline.host import Engine, EngineConfig
from engine.states import JobState
from tests.hostile_wasm import GROWS, LOOPS, generator

# The budgets of the client's wasm are the subject, the job's rows those of any job.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.database_agnostic]

ZKEY = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs" / "bn128" / "circuit.zkey"


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grown = bool(more)
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


@pytest.mark.parametrize("name, init", [("never-returns", LOOPS), ("grows-its-memory", GROWS)])
def test_a_hostile_generator_fails_its_job_and_costs_the_api_nothing(
        api: Client, uploads: Path, name: str, init: str) -> None:
    response = api.post("/api/v1/circuits", {"zkey": SimpleUploadedFile("c.zkey", ZKEY.read_bytes()),
                                             "wasm": SimpleUploadedFile("c.wasm", generator(init))})
    assert response.status_code == 201, response.content
    circuit = response.json()["id"]

    started = time.monotonic()
    response = api.post("/api/v1/jobs", {"circuit": circuit, "job_id": name, "inputs": {"x": "1"}},
                        content_type="application/json")
    assert response.status_code == 201, response.content
    assert time.monotonic() - started < 2

    before = tree_rss(os.getpid())
    engine = Engine(EngineConfig.from_settings(devices="cpu", synthesis=1, workers_per_device=1, scale="tiny",
                                               host_name="client-code")).start()
    slowest, largest = 0.0, before
    try:
        deadline = time.monotonic() + 120
        while ProofJob.objects.get(job_id=name).state not in (JobState.FAILED, JobState.DONE):
            assert time.monotonic() < deadline, "the job did not end within two minutes"
            asked = time.monotonic()
            assert api.get(f"/api/v1/jobs/{name}").status_code == 200
            slowest = max(slowest, time.monotonic() - asked)
            largest = max(largest, tree_rss(os.getpid()))
            time.sleep(0.2)
    finally:
        engine.stop(drain_seconds=5)
    job = ProofJob.objects.get(job_id=name)
    assert job.state == JobState.FAILED and "ran past its" in job.error, job.error
    assert slowest < 1.0
    assert largest - before < 256 << 20
