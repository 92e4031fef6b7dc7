"""The partition and job state machines, written down once, allow exactly their table."""

from __future__ import annotations

import itertools

import pytest

from engine.states import (
    JOB_TRANSITIONS,
    PARTITION_TRANSITIONS,
    JobState,
    PartitionState,
    TransitionError,
    check_job_transition,
    check_partition_transition,
)

P = PartitionState
ALLOWED_PARTITION = {
    (P.PENDING, P.RESERVING), (P.PENDING, P.FAILED), (P.PENDING, P.CANCELLED),
    (P.RESERVING, P.SYNTHESIZING), (P.RESERVING, P.PENDING), (P.RESERVING, P.FAILED), (P.RESERVING, P.CANCELLED),
    (P.SYNTHESIZING, P.SYNTH_DONE), (P.SYNTHESIZING, P.PENDING), (P.SYNTHESIZING, P.FAILED),
    (P.SYNTHESIZING, P.CANCELLED),
    (P.SYNTH_DONE, P.GPU), (P.SYNTH_DONE, P.PENDING), (P.SYNTH_DONE, P.FAILED), (P.SYNTH_DONE, P.CANCELLED),
    (P.GPU, P.FINALIZING), (P.GPU, P.PENDING), (P.GPU, P.FAILED), (P.GPU, P.CANCELLED),
    (P.FINALIZING, P.DONE), (P.FINALIZING, P.PENDING), (P.FINALIZING, P.FAILED), (P.FINALIZING, P.CANCELLED),
    (P.FAILED, P.PENDING), (P.CANCELLED, P.PENDING),
}
J = JobState
ALLOWED_JOB = {
    (J.QUEUED, J.RUNNING), (J.QUEUED, J.FAILED), (J.QUEUED, J.CANCELLED),
    (J.RUNNING, J.DONE), (J.RUNNING, J.FAILED), (J.RUNNING, J.CANCELLED), (J.RUNNING, J.QUEUED),
    (J.FAILED, J.QUEUED), (J.CANCELLED, J.QUEUED),
}


def test_every_partition_state_has_a_row_in_the_table() -> None:
    assert set(PARTITION_TRANSITIONS) == set(PartitionState.values)
    assert set(JOB_TRANSITIONS) == set(JobState.values)


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED_PARTITION))
def test_an_allowed_partition_transition_passes(current: str, target: str) -> None:
    check_partition_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    sorted(set(itertools.product(PartitionState.values, repeat=2)) - ALLOWED_PARTITION),
)
def test_a_forbidden_partition_transition_is_refused(current: str, target: str) -> None:
    with pytest.raises(TransitionError, match=f"from {current} to {target}"):
        check_partition_transition(current, target)


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED_JOB))
def test_an_allowed_job_transition_passes(current: str, target: str) -> None:
    check_job_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"), sorted(set(itertools.product(JobState.values, repeat=2)) - ALLOWED_JOB)
)
def test_a_forbidden_job_transition_is_refused(current: str, target: str) -> None:
    with pytest.raises(TransitionError):
        check_job_transition(current, target)


def test_a_done_partition_is_final() -> None:
    assert PARTITION_TRANSITIONS[P.DONE] == frozenset()
