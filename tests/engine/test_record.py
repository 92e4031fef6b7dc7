"""The status writer: every transition is checked against the state machine, fenced by the
claim it was made under, stamped with the next value of its host's clock, and settles the job."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.ledger.claims import Claim
from engine.ledger.writer import Refused, Transition
from engine.models import Partition, ProofJob
from engine.states import PARTITION_TRANSITIONS, JobState, PartitionState
from engine.status.records import current_version
from tests.engine.conftest import on_a_worker, walk

pytestmark = pytest.mark.django_db
P = PartitionState


def test_each_transition_takes_the_next_value_of_its_hosts_clock(make_writer, make_job) -> None:
    writer = make_writer()
    make_job()
    [claim] = writer.claim(1)
    before = current_version()
    v1 = writer.apply(Transition(claim, P.SYNTHESIZING))
    v2 = writer.apply(Transition(claim, P.SYNTH_DONE))
    assert v2 == v1 + 1 and current_version() == before + 2  # the farm's version counts every commit
    row = Partition.objects.get(pk=claim.partition_id)
    assert (row.clock, row.version) == (writer.clock, v2)


def test_a_write_under_a_stale_attempt_is_refused_and_logged(make_writer, make_job, caplog) -> None:
    writer = make_writer()
    make_job()
    [claim] = writer.claim(1)
    stale = Claim(claim.partition_id, claim.attempt - 1, claim.host_id)
    with caplog.at_level(logging.WARNING, logger="engine.ledger"), pytest.raises(Refused):
        writer.apply(Transition(stale, P.SYNTHESIZING))
    assert "refused stale write" in caplog.text
    assert Partition.objects.get(pk=claim.partition_id).state == P.RESERVING


def test_a_write_from_another_host_is_refused(make_writer, make_job) -> None:
    a, b = make_writer("host-a"), make_writer("host-b")
    make_job()
    [claim] = a.claim(1)
    with pytest.raises(Refused):
        b.apply(Transition(Claim(claim.partition_id, claim.attempt, b.host.pk), P.SYNTHESIZING))


def test_a_transition_the_state_machine_forbids_is_refused(make_writer, make_job) -> None:
    writer = make_writer()
    make_job()
    [claim] = writer.claim(1)
    with pytest.raises(Refused, match="cannot go from reserving to gpu"):
        writer.apply(Transition(claim, P.GPU))


def test_all_partitions_done_makes_the_job_done_with_proofs_in_order(make_writer, make_job) -> None:
    writer = make_writer()
    job = make_job(partitions=2)
    claims = writer.claim(2)
    for claim in reversed(claims):
        walk(writer, claim, P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING)
        row = Partition.objects.get(pk=claim.partition_id)
        writer.apply(Transition(claim, P.DONE, {"proof": {"p": row.index}, "public_inputs": [str(row.index)]}))
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified
    assert job.proof == [{"p": 0}, {"p": 1}]
    assert job.public_inputs == [["0"], ["1"]]


def test_a_job_whose_partitions_verified_under_different_keys_fails_saying_so(make_writer, make_job) -> None:
    writer = make_writer()
    job = make_job(partitions=2)
    for claim, key in zip(writer.claim(2), ("a" * 64, "b" * 64), strict=True):
        walk(writer, claim, P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING)
        writer.apply(Transition(claim, P.DONE, {"proof": {}, "public_inputs": [], "vk_digest": key}))
    job.refresh_from_db()
    assert job.state == JobState.FAILED and not job.verified
    assert "2 different verifying keys (aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb)" in job.error


def test_a_done_job_names_the_one_key_its_partitions_verified_under(make_writer, make_job) -> None:
    writer = make_writer()
    job = make_job(partitions=2)
    for claim in writer.claim(2):
        walk(writer, claim, P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING)
        writer.apply(Transition(claim, P.DONE, {"proof": {}, "public_inputs": [], "vk_digest": "c" * 64}))
    job.refresh_from_db()
    assert (job.state, job.vk_digest) == (JobState.DONE, "c" * 64)


def test_a_retryable_failure_requeues_until_attempts_are_spent(make_writer, make_job, settings) -> None:
    writer = make_writer()
    writer.max_attempts = 2
    job = make_job(partitions=2)
    claim = writer.claim(1)[0]
    walk(writer, claim, P.SYNTHESIZING)
    writer.apply(Transition(claim, P.FAILED, reason="gpu fell over", retryable=True))
    row = Partition.objects.get(pk=claim.partition_id)
    assert row.state == P.PENDING and row.host is None and row.errors[-1]["reason"] == "gpu fell over"
    again = writer.claim(1)[0]
    assert again.partition_id == claim.partition_id and again.attempt == claim.attempt + 1
    walk(writer, again, P.SYNTHESIZING)
    writer.apply(Transition(again, P.FAILED, reason="gpu fell over again", retryable=True))
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == "partition 0 failed after 2 attempts: gpu fell over again (before that, attempt 1: gpu fell over)"
    assert set(job.partitions.values_list("state", flat=True)) == {P.FAILED, P.CANCELLED}


# ---- the state machine, property-tested through the writer ---------------------------

targets = st.lists(st.sampled_from(list(PartitionState.values)), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=targets)
def test_random_transitions_are_applied_exactly_as_the_table_allows(make_writer, make_job, sequence) -> None:
    writer = make_writer()
    job = make_job(partitions=1)
    pk = job.partitions.get().pk
    ProofJob.objects.exclude(pk=job.pk).update(state=JobState.CANCELLED)  # earlier examples' jobs
    state, claim, job_active = P.PENDING, None, True
    last_version = 0
    for target in sequence:
        if claim is None and state == P.PENDING and job_active:
            [claim] = writer.claim(1)
            state = P.RESERVING  # a claim is the pending → reserving transition
        allowed = claim is not None and target in PARTITION_TRANSITIONS[state]
        try:
            held = claim or Claim(pk, 0, writer.host.pk)
            version = writer.apply(Transition(held, target, on_a_worker(writer, held) if target == P.GPU else {}))
        except Refused:
            assert not allowed, f"{state} → {target} was refused"
            continue
        assert allowed, f"{state} → {target} was applied"
        assert version > last_version
        last_version, state = version, target
        if target == P.PENDING:
            claim = None  # handed back: a new claim is needed
        if target in (P.DONE, P.FAILED):
            job_active = False
        assert Partition.objects.get(pk=pk).state == state, sequence
    assert ProofJob.objects.get(pk=job.pk).state in JobState.values
