"""A job's outcome line ("job done …") is logged once its transaction has committed, never before."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction

from engine.ledger.claims import Claim
from engine.ledger.writer import Transition
from engine.models import Partition
from engine.states import PartitionState
from tests.engine.conftest import walk

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState


class RolledBack(Exception):
    pass


def finish(writer, claim: Claim) -> None:
    walk(writer, claim, P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING)
    writer.apply(Transition(claim, P.DONE, {"proof": {"p": 0}, "public_inputs": ["0"]}))


def done_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("job done")]


def test_job_done_is_logged_only_after_the_commit(make_writer, make_job, caplog) -> None:
    writer = make_writer()
    job = make_job()
    [claim] = writer.claim(1)
    with caplog.at_level(logging.INFO, logger="engine.ledger"):
        with transaction.atomic():
            finish(writer, claim)
            assert done_lines(caplog) == [], "logged while the outcome could still roll back"
        [line] = done_lines(caplog)
        assert line.startswith(f"job done porep-c2 {job.job_id}: 1 partition(s)")


def test_job_done_is_not_logged_when_the_transaction_rolls_back(make_writer, make_job, caplog) -> None:
    writer = make_writer()
    make_job()
    [claim] = writer.claim(1)
    with caplog.at_level(logging.INFO, logger="engine.ledger"), pytest.raises(RolledBack):
        with transaction.atomic():
            finish(writer, claim)
            raise RolledBack
    assert Partition.objects.get(pk=claim.partition_id).state == P.RESERVING
    assert done_lines(caplog) == []
