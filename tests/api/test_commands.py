"""The management commands: createtoken, submitjob, jobs."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from engine.ledger.tokens import hash_token
from engine.models import ApiToken, Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.api.conftest import RANDOMNESS, SEED

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_createtoken_prints_a_working_token_once_and_stores_its_hash() -> None:
    token = run("createtoken", "curio-east").strip()
    assert ApiToken.objects.get(name="curio-east").token_hash == hash_token(token)
    assert Client(headers={"Authorization": f"Bearer {token}"}).get("/api/v1/jobs").status_code == 200


def test_createtoken_refuses_a_name_already_used() -> None:
    run("createtoken", "dup")
    with pytest.raises(CommandError, match="already exists"):
        run("createtoken", "dup")


def test_createtoken_revoke_makes_the_token_useless() -> None:
    token = run("createtoken", "gone").strip()
    run("createtoken", "gone", "--revoke")
    assert Client(headers={"Authorization": f"Bearer {token}"}).get("/api/v1/jobs").status_code == 401


def test_submitjob_takes_inputs_from_flags() -> None:
    run("submitjob", "window-post", "wp-1", "--sector-seed", SEED, "--randomness", RANDOMNESS, "--partitions", "2")
    job = ProofJob.objects.get(job_id="wp-1")
    assert (job.kind, job.num_partitions) == ("window-post", 2)


def test_submitjob_takes_inputs_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"sector_seed": SEED, "randomness": RANDOMNESS}))
    out = run("submitjob", "porep-c2", "p-1", "--inputs", str(path), "--priority", "high")
    assert "submitted" in out and ProofJob.objects.get(job_id="p-1").priority == 1


def test_submitjob_names_the_missing_input_by_its_flag() -> None:
    with pytest.raises(CommandError, match="^--randomness: is required"):
        run("submitjob", "porep-c2", "p-2", "--sector-seed", SEED)


def test_submitjob_wait_writes_the_proof_when_the_job_is_done(tmp_path: Path, settings) -> None:
    settings.DATA_DIR = tmp_path
    run("submitjob", "winning-post", "w-1", "--sector-seed", SEED, "--randomness", RANDOMNESS)
    # What an engine would leave behind, so the wait ends at once.
    Partition.objects.filter(job__job_id="w-1").update(state=PartitionState.DONE, proof={"pi_a": []})
    ProofJob.objects.filter(job_id="w-1").update(state=JobState.DONE, proof=[{"pi_a": []}])
    out = run("submitjob", "winning-post", "w-1", "--sector-seed", SEED, "--randomness", RANDOMNESS, "--wait")
    path = Path(out.strip().splitlines()[-1])
    assert path == tmp_path / "proofs" / "w-1.json"
    assert json.loads(path.read_text())["partitions"][0]["proof"] == {"pi_a": []}
    assert "1/1 partitions" in out


def test_submitjob_wait_reports_a_failed_job() -> None:
    run("submitjob", "winning-post", "w-2", "--sector-seed", SEED, "--randomness", RANDOMNESS)
    ProofJob.objects.filter(job_id="w-2").update(state=JobState.FAILED, error="key missing")
    with pytest.raises(CommandError, match="key missing"):
        run("submitjob", "winning-post", "w-2", "--sector-seed", SEED, "--randomness", RANDOMNESS, "--wait")


def test_jobs_lists_whole_ids_with_state_and_progress() -> None:
    run("submitjob", "snap-update", "snap-update-sector-0000000042", "--sector-seed", SEED, "--randomness",
        RANDOMNESS, "--data-seed", SEED)
    run("submitjob", "winning-post", "w-3", "--sector-seed", SEED, "--randomness", RANDOMNESS)
    out = run("jobs", "--kind", "snap-update")
    assert "snap-update-sector-0000000042" in out and "0/16" in out and "w-3" not in out
    assert "w-3" in run("jobs", "--state", "queued", "--limit", "5")
