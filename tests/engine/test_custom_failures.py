"""A custom job that fails on a property of its own files fails once, for good, and says
why without naming the server folder its files are kept in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.ledger.jobs import submit_job
from engine.models import Partition, ProofJob
from engine.prover import write_wtns, write_zkey
from engine.prover.setup import setup, synthetic_circuit
from engine.states import JobState

pytestmark = [pytest.mark.django_db(transaction=True)]


def custom_job(folder: Path, unsatisfied: bool = False) -> ProofJob:
    """A custom job over a 200-constraint BN254 circuit whose files lie in ``folder``."""
    folder.mkdir(parents=True)
    r1cs, witness = synthetic_circuit("bn128", 200, n_public=2, seed=7)
    pk, _ = setup(r1cs, seed=1)
    if unsatisfied:
        witness = witness.copy()
        witness[-1, 0] ^= np.uint64(1)  # one private value changed: its constraint no longer holds
    write_zkey(folder / "circuit.zkey", pk)
    write_wtns(folder / "witness.wtns", "bn128", witness)
    job, _ = submit_job(kind="custom", job_id="custom-bad", inputs={}, num_partitions=1,
                        circuit_id="custom/test", curve="bn128", upload_dir=str(folder))
    return job


def run_to_the_end(start_engine, job: ProofJob) -> tuple[ProofJob, Partition]:
    engine = start_engine()
    assert engine.run_until_idle(timeout=60)
    job = ProofJob.objects.get(pk=job.pk)
    return job, job.partitions.get()


def test_an_unsatisfied_witness_fails_once_and_is_not_retried(start_engine, tmp_path) -> None:
    job, part = run_to_the_end(start_engine, custom_job(tmp_path / "uploads" / "901", unsatisfied=True))
    assert job.state == JobState.FAILED
    assert len(part.errors) == 1 and part.attempt == 1
    assert "does not satisfy" in job.error


def test_a_key_corrupted_after_upload_fails_once_without_naming_the_folder(start_engine, tmp_path) -> None:
    folder = tmp_path / "uploads" / "902"
    job = custom_job(folder)
    key = folder / "circuit.zkey"
    key.write_bytes(key.read_bytes()[:5000])
    job, part = run_to_the_end(start_engine, job)
    assert job.state == JobState.FAILED and len(part.errors) == 1
    assert "circuit.zkey" in job.error
    assert str(tmp_path) not in job.error and "902" not in job.error
