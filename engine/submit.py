"""Accepting a proof request: one job row and its partitions, idempotent on job_id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import IntegrityError, transaction

from engine.models import ApiToken, Partition, ProofJob
from engine.record import publish_hint
from engine.states import KIND_PRIORITY, Curve, ProofKind


class JobConflict(Exception):
    """A job with this id exists and was asked for something else."""

    def __init__(self, job: ProofJob) -> None:
        super().__init__(f"job id {job.job_id!r} is already used by a different request")
        self.job = job


def request_digest(kind: str, inputs: dict[str, Any], priority: int | None, curve: str) -> str:
    canonical = json.dumps({"kind": kind, "inputs": inputs, "priority": priority, "curve": curve},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def submit_job(
    *,
    kind: str,
    job_id: str,
    inputs: dict[str, Any],
    num_partitions: int,
    circuit_id: str = "",
    scale: str = "",
    priority: int | None = None,
    curve: str = Curve.BLS12_381,
    client: ApiToken | None = None,
    upload_dir: str = "",
) -> tuple[ProofJob, bool]:
    """Create the job and its pending partitions; returns (job, created).

    Inputs must already be validated (engine.circuits.kinds does that for the built-in kinds).
    The same request twice returns the first job; a different request under the same id
    raises JobConflict, because two requests sharing an id once mixed partitions into
    invalid proofs.
    """
    if kind not in ProofKind.values:
        raise ValueError(f"unknown kind {kind!r}")
    digest = request_digest(kind, inputs, priority, curve)
    existing = ProofJob.objects.filter(job_id=job_id).first()
    if existing is not None:
        return _same_or_conflict(existing, digest)
    try:
        with transaction.atomic():
            job = ProofJob.objects.create(
                job_id=job_id, kind=kind, inputs=inputs, curve=curve, circuit_id=circuit_id, scale=scale,
                priority=KIND_PRIORITY[kind] if priority is None else priority,
                num_partitions=num_partitions, request_digest=digest, client=client, upload_dir=upload_dir,
            )
            Partition.objects.bulk_create(Partition(job=job, index=i) for i in range(num_partitions))
    except IntegrityError:
        # Another submitter won the race for this id.
        return _same_or_conflict(ProofJob.objects.get(job_id=job_id), digest)
    _hint_new_work(job)
    return job, True


def _same_or_conflict(job: ProofJob, digest: str) -> tuple[ProofJob, bool]:
    if job.request_digest != digest:
        raise JobConflict(job)
    return job, False


def _hint_new_work(job: ProofJob) -> None:
    """Tell consoles a job arrived. Best effort: the records are the truth."""
    publish_hint(job=job.job_id)
