"""The states of jobs and partitions, and the only transitions allowed between them.

This module is the single written-down copy of both state machines; the status writer
checks every transition against it before anything reaches the database.
"""

from __future__ import annotations

from django.db import models

from engine.circuits import limits
from engine.circuits.limits import MAX_WINDOW_POST_PARTITIONS as MAX_WINDOW_POST_PARTITIONS  # re-exported


class ProofKind(models.TextChoices):
    WINNING_POST = limits.WINNING_POST, limits.WINNING_POST
    WINDOW_POST = limits.WINDOW_POST, limits.WINDOW_POST
    POREP_C2 = limits.POREP_C2, limits.POREP_C2
    SNAP_UPDATE = limits.SNAP_UPDATE, limits.SNAP_UPDATE
    CUSTOM = "custom", "custom"


class Priority(models.IntegerChoices):
    """Lower numbers are served first."""

    CRITICAL = 0, "critical"
    HIGH = 1, "high"
    NORMAL = 2, "normal"
    LOW = 3, "low"


class Curve(models.TextChoices):
    BLS12_381 = "bls12381", "BLS12-381"
    BN254 = "bn128", "BN254"


class JobState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class PartitionState(models.TextChoices):
    PENDING = "pending", "pending"
    RESERVING = "reserving", "reserving"
    SYNTHESIZING = "synthesizing", "synthesizing"
    SYNTH_DONE = "synth_done", "synth_done"
    GPU = "gpu", "gpu"
    FINALIZING = "finalizing", "finalizing"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


P = PartitionState
J = JobState

# Work moves forward one phase at a time. PENDING is unclaimed work and nothing else: a claim
# moves it to RESERVING (held by a host, waiting for its key, its memory or its synthesis
# process). Any live phase may be handed back to PENDING (drain, lapsed lease, retryable error) or end in FAILED /
# CANCELLED. A failed or cancelled partition comes back only through an explicit retry.
PARTITION_TRANSITIONS: dict[str, frozenset[str]] = {
    P.PENDING: frozenset({P.RESERVING, P.FAILED, P.CANCELLED}),
    P.RESERVING: frozenset({P.SYNTHESIZING, P.PENDING, P.FAILED, P.CANCELLED}),
    P.SYNTHESIZING: frozenset({P.SYNTH_DONE, P.PENDING, P.FAILED, P.CANCELLED}),
    P.SYNTH_DONE: frozenset({P.GPU, P.PENDING, P.FAILED, P.CANCELLED}),
    P.GPU: frozenset({P.FINALIZING, P.PENDING, P.FAILED, P.CANCELLED}),
    P.FINALIZING: frozenset({P.DONE, P.PENDING, P.FAILED, P.CANCELLED}),
    P.DONE: frozenset(),
    P.FAILED: frozenset({P.PENDING}),
    P.CANCELLED: frozenset({P.PENDING}),
}

JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    J.QUEUED: frozenset({J.RUNNING, J.FAILED, J.CANCELLED}),
    J.RUNNING: frozenset({J.DONE, J.FAILED, J.CANCELLED, J.QUEUED}),
    J.DONE: frozenset(),
    J.FAILED: frozenset({J.QUEUED}),
    J.CANCELLED: frozenset({J.QUEUED}),
}

# Claimed by a host (leased, fenced): every state between a claim and an end.
PARTITION_LIVE = frozenset({P.RESERVING, P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING})
# The partition's own memory reservation is held in these (reserving waits for it).
PARTITION_HOLDING = frozenset({P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING})
PARTITION_TERMINAL = frozenset({P.DONE, P.FAILED, P.CANCELLED})
JOB_ACTIVE = frozenset({J.QUEUED, J.RUNNING})
JOB_TERMINAL = frozenset({J.DONE, J.FAILED, J.CANCELLED})


class TransitionError(ValueError):
    """A transition the state machine does not allow."""


def check_partition_transition(current: str, target: str) -> None:
    if target not in PARTITION_TRANSITIONS[current]:
        raise TransitionError(f"partition cannot go from {current} to {target}")


def check_job_transition(current: str, target: str) -> None:
    if target not in JOB_TRANSITIONS[current]:
        raise TransitionError(f"job cannot go from {current} to {target}")


# Each kind's default priority, as operators know it (GET /api/v1/kinds lists it with the kind).
KIND_PRIORITY: dict[str, int] = {
    ProofKind.WINNING_POST: Priority.CRITICAL,
    ProofKind.WINDOW_POST: Priority.HIGH,
    ProofKind.POREP_C2: Priority.NORMAL,
    ProofKind.SNAP_UPDATE: Priority.NORMAL,
    ProofKind.CUSTOM: Priority.NORMAL,
}
