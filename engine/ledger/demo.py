"""Demo jobs of every kind, so a first run shows pipelines flowing at once."""

from __future__ import annotations

import secrets

from engine.circuits.kinds import KINDS, demo_inputs, validate_inputs
from engine.ledger.submission import Submission, submit
from engine.models import ProofJob


def submit_demo_jobs(scale: str, per_kind: int = 1, prefix: str = "demo") -> list[ProofJob]:
    """``per_kind`` jobs of each built-in kind at ``scale``, with fresh random inputs."""
    jobs = []
    for kind in KINDS:
        for _ in range(per_kind):
            inputs, n = validate_inputs(kind, demo_inputs(kind))
            job, _ = submit(Submission(kind=kind, job_id=f"{prefix}-{kind}-{secrets.token_hex(4)}", inputs=inputs,
                                       num_partitions=n, circuit_id=f"{kind}/{scale}", scale=scale))
            jobs.append(job)
    return jobs
