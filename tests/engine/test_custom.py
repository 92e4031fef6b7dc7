"""A client's own snarkjs circuit (zkey + wtns) is proved and verified like a built-in kind."""

from __future__ import annotations

import pytest

from engine.ledger.jobs import submit_job
from engine.models import ProofJob
from engine.prover import write_wtns, write_zkey
from engine.prover.setup import setup, synthetic_circuit
from engine.states import JobState

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("curve", ["bn128"])
def test_a_custom_circuit_is_proved_from_its_files(start_engine, tmp_path, curve) -> None:
    r1cs, witness = synthetic_circuit(curve, 200, n_public=2, seed=7)
    pk, _ = setup(r1cs, seed=1)
    write_zkey(tmp_path / "circuit.zkey", pk)
    write_wtns(tmp_path / "witness.wtns", curve, witness)
    job, _ = submit_job(kind="custom", job_id="custom-1", inputs={}, num_partitions=1, circuit_id="custom/test",
                        curve=curve, upload_dir=str(tmp_path))
    engine = start_engine()
    assert engine.run_until_idle(timeout=60)
    job = ProofJob.objects.get(pk=job.pk)
    assert job.state == JobState.DONE, job.error
    assert job.verified and job.public_inputs is not None and len(job.public_inputs[0]) == 2
