"""Demo jobs of every kind, so a first run shows pipelines flowing at once."""

from __future__ import annotations

import secrets

from engine.circuits.kinds import KINDS, validate_inputs
from engine.ledger.jobs import submit_job
from engine.models import ProofJob


def demo_inputs(kind: str, window_partitions: int = 2) -> dict[str, object]:
    raw: dict[str, object] = {"sector_seed": secrets.token_hex(32), "randomness": secrets.token_hex(32)}
    if kind == "snap-update":
        raw["data_seed"] = secrets.token_hex(32)
    if kind == "window-post":
        raw["partitions"] = window_partitions
    return raw


def submit_demo_jobs(scale: str, per_kind: int = 1, prefix: str = "demo") -> list[ProofJob]:
    """``per_kind`` jobs of each built-in kind at ``scale``, with fresh random inputs."""
    jobs = []
    for kind in KINDS:
        for _ in range(per_kind):
            inputs, n = validate_inputs(kind, demo_inputs(kind))
            job, _ = submit_job(kind=kind, job_id=f"{prefix}-{kind}-{secrets.token_hex(4)}", inputs=inputs,
                                num_partitions=n, circuit_id=f"{kind}/{scale}", scale=scale)
            jobs.append(job)
    return jobs
