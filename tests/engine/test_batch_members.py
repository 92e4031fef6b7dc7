"""A proving batch in the records: its members go onto the GPU together (one transaction, one
batch marker, one worker showing them all), and a member whose witness is bad fails alone
with its own reason (its job with it, as any non-retryable failure does) while the batch's
members of another job of the same key are proved, each verified."""

from __future__ import annotations

import dataclasses

import pytest

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.models import Partition, Worker
from engine.pipeline.host import Engine, EngineConfig
from engine.states import PartitionState
from tests.engine.test_split_race import park_finishes, synthesized

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState


def proving(worker: Worker) -> list[int]:
    return sorted(Partition.objects.filter(worker=worker, state=P.GPU).values_list("index", flat=True))


def test_a_bad_member_fails_alone_and_the_others_are_proved_and_verified(engine_params) -> None:
    for job_id in ("batch-bad", "batch-good"):  # two jobs of one key, two partitions each
        inputs, n = validate_inputs("window-post", demo_inputs("window-post", window_partitions=2))
        submit_job(kind="window-post", job_id=job_id, inputs=inputs, num_partitions=n, circuit_id="window-post/tiny",
                   scale="tiny")
    engine = Engine(EngineConfig.from_settings(devices="cpu", workers_per_device=1, budget="1GiB",
                                               host_name="batch-host", batch_max=4)).prepare()
    try:
        w0 = engine.workers[0]
        items = [synthesized(engine, c) for c in engine.writer.claim(4)]
        assert len({id(item.key) for item in items}) == 1  # one key: the key cache's
        assert [item.job_id for item in items] == ["batch-bad"] * 2 + ["batch-good"] * 2
        bad = items[0]
        assert bad.synthesized is not None
        c = bad.synthesized.assignment.c.copy()
        c[0, 0] ^= 1  # a·b ≠ c on row 0: this member's witness no longer satisfies the circuit
        bad.synthesized = dataclasses.replace(bad.synthesized,
                                              assignment=dataclasses.replace(bad.synthesized.assignment, c=c))
        parked = park_finishes(engine)

        members = w0.occupy_batch(items)
        assert members == items
        assert proving(w0.row) == sorted(item.index for item in items)  # the worker shows every member
        rows = Partition.objects.filter(pk__in=[item.claim.partition_id for item in items])
        assert {r.batch for r in rows} == {str(items[0].claim.partition_id)}
        assert len({r.gpu_started_at for r in rows}) == 1  # one transaction

        launched = w0.launch_batch(members)
        assert launched == items[2:] == parked  # the bad job's other member was cancelled with its job
        assert proving(w0.row) == []
        failed = Partition.objects.get(pk=bad.claim.partition_id)
        assert failed.state == P.FAILED and "constraint 0 not satisfied" in failed.error, failed.error
        assert Partition.objects.get(pk=items[1].claim.partition_id).state == P.CANCELLED
        for item in launched:
            engine.finalizers.finish(item)
            row = Partition.objects.get(pk=item.claim.partition_id)
            assert row.state == P.DONE and row.proof and row.vk_digest, row.error
    finally:
        engine.stop(drain_seconds=1)
