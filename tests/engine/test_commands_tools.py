"""The operator's commands: submitjob --out, the no-engine hint, canceljob, retryjob, and the
progress line of a long first step (the kernel build)."""

from __future__ import annotations

import io
import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from engine.api.proof_bytes import job_proof_bytes
from engine.management.commands._common import with_progress
from engine.models import EngineHost, Partition, ProofJob
from engine.states import JobState, PartitionState

pytestmark = pytest.mark.django_db

SEED = "11" * 32
RANDOMNESS = "2a" * 32
PROOF = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs" / "bls12381" / "proof.json"
HINT = "no engine is running: start one with `manage.py runengine`"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def submit(job_id: str = "w-1", *extra: str) -> tuple[str, str]:
    return run("submitjob", "winning-post", job_id, "--sector-seed", SEED, "--randomness", RANDOMNESS, *extra)


def finish(job_id: str) -> dict:
    """What an engine leaves behind for a proved job: its partition's real proof, state done."""
    proof = json.loads(PROOF.read_text())
    Partition.objects.filter(job__job_id=job_id).update(state=PartitionState.DONE, proof=proof, public_inputs=["1"])
    ProofJob.objects.filter(job_id=job_id).update(state=JobState.DONE, proof=[proof], public_inputs=[["1"]])
    return proof


def live_host(name: str = "gpu-a") -> EngineHost:
    return EngineHost.objects.create(name=name, heartbeat_at=timezone.now(), started_at=timezone.now())


# ---- submitjob --out and the hint -------------------------------------------------------------


def test_submitjob_out_waits_and_writes_the_proof_document_to_the_path(tmp_path: Path) -> None:
    submit()
    proof = finish("w-1")
    target = tmp_path / "nested" / "w-1.json"
    out, _ = submit("w-1", "--out", str(target))
    assert out.strip().splitlines()[-1] == str(target)
    assert "1/1 partitions" in out
    assert json.loads(target.read_text())["partitions"][0]["proof"] == proof


def test_submitjob_out_with_format_bytes_writes_the_compressed_proof(tmp_path: Path) -> None:
    submit()
    proof = finish("w-1")
    target = tmp_path / "w-1.proof"
    submit("w-1", "--out", str(target), "--format", "bytes")
    assert target.read_bytes() == job_proof_bytes([proof])
    assert len(target.read_bytes()) == 192


def test_submitjob_says_how_to_start_an_engine_when_none_is_running() -> None:
    _, err = submit()
    assert HINT in err


def test_submitjob_says_nothing_of_engines_when_one_is_alive() -> None:
    live_host()
    _, err = submit()
    assert "no engine" not in err


@pytest.mark.parametrize("how", ["stopped", "silent"])
def test_a_stopped_or_silent_host_does_not_count_as_running(how: str) -> None:
    host = live_host()
    if how == "stopped":
        EngineHost.objects.filter(pk=host.pk).update(stopped_at=timezone.now())
    else:
        EngineHost.objects.filter(pk=host.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    _, err = submit()
    assert HINT in err


def test_submitjob_wait_shows_in_the_bar_that_no_engine_is_running() -> None:
    submit()
    out = io.StringIO()
    with pytest.raises(CommandError, match="gave up"):
        call_command("submitjob", "winning-post", "w-1", "--sector-seed", SEED, "--randomness", RANDOMNESS,
                     "--wait", "--timeout", "0.01", stdout=out, stderr=io.StringIO())
    assert "queued  (no engine is running)" in out.getvalue()


def test_jobs_adds_the_hint_while_jobs_wait_and_no_engine_runs() -> None:
    submit()
    _, err = run("jobs")
    assert "1 job(s) queued or running" in err and HINT in err
    live_host()
    assert "no engine" not in run("jobs")[1]


# ---- canceljob and retryjob ---------------------------------------------------------------------


def test_canceljob_cancels_a_queued_job_and_its_partitions() -> None:
    submit()
    out, _ = run("canceljob", "w-1")
    assert out.strip() == "cancelled w-1"  # not "cancelled w-1 (it is cancelled)"
    job = ProofJob.objects.get(job_id="w-1")
    assert job.state == JobState.CANCELLED
    assert set(job.partitions.values_list("state", flat=True)) == {PartitionState.CANCELLED}


def test_canceljob_leaves_a_finished_job_and_says_so() -> None:
    submit()
    finish("w-1")
    with pytest.raises(CommandError, match="w-1 is already done"):
        run("canceljob", "w-1")
    assert ProofJob.objects.get(job_id="w-1").state == JobState.DONE


def test_canceljob_names_an_unknown_id_and_still_cancels_the_others() -> None:
    submit()
    with pytest.raises(CommandError, match="no job with id 'nope'"):
        run("canceljob", "nope", "w-1")
    assert ProofJob.objects.get(job_id="w-1").state == JobState.CANCELLED


def test_retryjob_requeues_a_failed_job_and_hints_at_starting_an_engine() -> None:
    submit()
    Partition.objects.filter(job__job_id="w-1").update(state=PartitionState.FAILED, error="out of memory")
    ProofJob.objects.filter(job_id="w-1").update(state=JobState.FAILED, error="out of memory")
    out, err = run("retryjob", "w-1")
    assert "requeued w-1 (it is queued)" in out
    assert HINT in err
    job = ProofJob.objects.get(job_id="w-1")
    assert (job.state, job.error) == (JobState.QUEUED, "")
    assert set(job.partitions.values_list("state", flat=True)) == {PartitionState.PENDING}


def test_retryjob_refuses_a_job_that_has_not_failed() -> None:
    submit()
    with pytest.raises(CommandError, match="w-1 is queued"):
        run("retryjob", "w-1")


# ---- the progress of a long step -------------------------------------------------------------------


class Recorder(io.StringIO):
    """Output that tells a waiting test when a line containing ``wanted`` arrives."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.seen = threading.Event()

    def write(self, text: str) -> int:
        if self.wanted in text:
            self.seen.set()
        return super().write(text)


def test_a_quick_step_prints_nothing() -> None:
    out = io.StringIO()
    assert with_progress(out, "building the kernels", lambda: 7, announce_after=60) == 7
    assert out.getvalue() == ""


def test_a_long_step_is_announced_ticks_and_ends_with_its_time() -> None:
    out = Recorder("  … ")

    def slow() -> str:
        # Returns only once the announcement and a tick have been printed: no clock in the test.
        assert out.seen.wait(30), out.getvalue()
        return "built"

    assert with_progress(out, "building the kernels", slow, announce_after=0, every=0.01) == "built"
    lines = out.getvalue().splitlines()
    assert lines[0] == "building the kernels …"
    assert lines[1].startswith("  … ") and lines[1].endswith(" s")
    assert lines[-1].startswith("building the kernels: done in ")


def test_a_cpu_only_start_has_no_gpu_kernels_to_build() -> None:
    from engine.management.commands._common import gpu_archs

    assert gpu_archs("cpu") == []
