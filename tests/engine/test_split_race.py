"""The seed system's famous race, reproduced with real proving: W0 starts partition A, A's
finalizer has not run when W0 starts partition B, then A finishes. The records must say W0
is proving B and A is done — a worker's state is derived from its partitions, and no
finalizer writes it."""

from __future__ import annotations

import pytest

from engine.ledger.jobs import submit_job
from engine.models import Partition, Worker
from engine.pipeline.host import Engine, EngineConfig
from engine.pipeline.lifecycle import Finish, Phase, Start
from engine.pipeline.work import WorkItem
from engine.states import PartitionState

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState


def proving(worker: Worker) -> list[int]:
    """What the console shows for a worker: the partitions in gpu with it."""
    return list(Partition.objects.filter(worker=worker, state=P.GPU).values_list("index", flat=True))


def synthesized(engine: Engine, claim) -> WorkItem:
    """Take a claimed partition through the real reservation and synthesis (a pool process),
    with no engine thread running: it waits for a worker, which the test is."""
    item = engine.adopt(claim)
    engine.inflight.run(item, Start())  # reserved, recorded synthesizing, sent to the pool
    # (one that failed to reserve would leave collect_one waiting for ever: said here instead)
    assert item.state.phase is Phase.SYNTHESIZING, item.state
    engine.synthesis.collect_one()  # written to its blocks, recorded synth_done, queued
    assert item.state.phase is Phase.WAITING, item.state
    assert engine.proof_queue.remove(claim.partition_id) is item  # the test's worker takes it itself
    return item


def park_finishes(engine: Engine) -> list[WorkItem]:
    """Launched partitions wait here for the test to finish them, not for a finalizer thread."""
    parked: list[WorkItem] = []
    engine.inflight.executors[(Finish, None)] = lambda item, instruction: parked.append(item)
    return parked


def test_a_late_finalizer_never_makes_a_proving_worker_look_idle(engine_params) -> None:
    from engine.circuits.kinds import validate_inputs
    from engine.ledger.demo import demo_inputs

    inputs, n = validate_inputs("window-post", demo_inputs("window-post", window_partitions=2))
    submit_job(kind="window-post", job_id="race-window-post", inputs=inputs, num_partitions=n,
               circuit_id="window-post/tiny", scale="tiny")
    engine = Engine(EngineConfig.from_settings(devices="cpu", workers_per_device=1, budget="64MiB",
                                               host_name="race-host")).prepare()
    try:
        w0 = engine.workers[0]
        a, b = (synthesized(engine, c) for c in engine.writer.claim(2))
        parked = park_finishes(engine)

        assert w0.occupy(a) and w0.launch(a)  # A's kernels launched; its finalizer has not run
        assert w0.occupy(b)  # W0 is on B while A still waits for its finalizer
        assert proving(w0.row) == [1]
        engine.finalizers.finish(a)  # now A finishes

        assert Partition.objects.get(pk=a.claim.partition_id).state == P.DONE
        assert proving(w0.row) == [1], "W0 must still show P1 after P0's finalizer ran"
        assert Partition.objects.get(pk=a.claim.partition_id).worker_id == w0.row.pk  # who proved A stays recorded

        assert w0.launch(b)
        assert parked == [a, b]
        engine.finalizers.finish(b)
        assert proving(w0.row) == []
        assert Partition.objects.get(pk=b.claim.partition_id).state == P.DONE
    finally:
        engine.finalizers.stop()
        engine.synthesis.stop()
