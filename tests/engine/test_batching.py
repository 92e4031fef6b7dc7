"""Batched proving through the engine: a worker takes several synthesized partitions of one
key, records them on the GPU together (one transaction, one batch marker), proves them in one
launch, and each ends done with its own proof, verified."""

from __future__ import annotations

from collections import defaultdict

import pytest

from engine.ledger.demo import submit_demo_jobs
from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_multi_partition_job_is_proved_in_batches_and_every_proof_verifies(start_engine) -> None:
    jobs = [job for job in submit_demo_jobs("tiny") if job.kind == "porep-c2"]
    assert jobs and jobs[0].num_partitions >= 4
    engine = start_engine(synthesis=4, workers_per_device=1, batch_max=4, batch_wait_ms=500)
    assert engine.run_until_idle(timeout=180)
    job = ProofJob.objects.get(pk=jobs[0].pk)
    assert job.state == JobState.DONE, job.error
    assert job.verified and job.proof is not None and len(job.proof) == job.num_partitions
    parts = list(Partition.objects.filter(job=job))
    assert all(p.state == PartitionState.DONE and p.proof and p.vk_digest for p in parts)
    batches: dict[str, list[Partition]] = defaultdict(list)
    for p in parts:
        if p.batch:
            batches[p.batch].append(p)
    assert any(len(members) > 1 for members in batches.values()), "no partition was proved in a batch"
    for members in batches.values():
        assert len(members) <= 4
        # recorded onto the GPU in one transaction, by one worker
        assert len({p.gpu_started_at for p in members}) == 1 and len({p.worker_id for p in members}) == 1


