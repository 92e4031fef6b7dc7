"""The whole pipeline with real proving at scale tiny: every kind ends done and verified."""

from __future__ import annotations

import pytest

from engine.ledger.demo import submit_demo_jobs
from engine.models import ProofJob
from engine.states import JobState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_one_job_of_every_kind_is_proved_and_verified(start_engine) -> None:
    jobs = submit_demo_jobs("tiny")
    engine = start_engine()
    assert engine.run_until_idle(timeout=120)
    for job in ProofJob.objects.filter(pk__in=[j.pk for j in jobs]):
        assert job.state == JobState.DONE, job.error
        assert job.verified and job.proof is not None and len(job.proof) == job.num_partitions


def test_no_more_partitions_are_recorded_synthesizing_than_the_engine_has_slots(start_engine) -> None:
    # a slot is freed only once its partition is recorded synth_done, so with one slot the
    # recorded synthesis intervals follow each other and never overlap
    from engine.models import Partition

    jobs = submit_demo_jobs("tiny")
    engine = start_engine(synthesis=1)
    assert engine.run_until_idle(timeout=120)
    spans = sorted(Partition.objects.filter(job__in=jobs).values_list("synth_started_at", "synth_finished_at"))
    assert len(spans) >= 8
    for (_, finished), (started, _) in zip(spans, spans[1:], strict=False):
        assert started is not None and finished is not None and started >= finished
