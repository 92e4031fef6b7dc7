"""A partition whose job is cancelled while it is being proved is abandoned at the next
prover phase: its memory is freed at once, nothing more is recorded for it, and the engine
goes on. (A native MSM cannot be interrupted, so a phase is the unit; at any scale that is
a fraction of a whole proof.)"""

from __future__ import annotations

import pytest

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import cancel_job, submit_job
from engine.models import Partition, ProofJob
from engine.pipeline.host import Engine, EngineConfig
from engine.states import JobState, PartitionState
from tests.engine.test_split_race import park_finishes, synthesized

pytestmark = pytest.mark.django_db(transaction=True)
P = PartitionState


@pytest.fixture
def engine(engine_params):
    inputs, n = validate_inputs("window-post", demo_inputs("window-post", window_partitions=2))
    submit_job(kind="window-post", job_id="cancel-midway", inputs=inputs, num_partitions=n,
               circuit_id="window-post/tiny", scale="tiny")
    engine = Engine(EngineConfig.from_settings(devices="cpu", workers_per_device=1, budget="64MiB",
                                               host_name="midway-host")).prepare()
    yield engine
    engine.finalizers.stop()
    engine.synthesis.stop()


@pytest.fixture
def msm_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many G1/G2 MSMs the real kernels ran, plain or through the key's fixed-base tables
    (a counting wrapper around them)."""
    from engine.prover.backends.cpu import native

    calls = {"msm_g1": 0, "msm_g2": 0}
    for name in calls:
        for kernel in (name, f"{name}_copies"):
            real = getattr(native, kernel)

            def counted(*args, _real=real, _name=name, **kwargs):
                calls[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(native, kernel, counted)
    return calls


def holds_memory(engine: Engine) -> bool:
    return any("cancel-midway" in owner for owner in engine.memory.snapshot()["by_owner"])


def test_a_proof_cancelled_on_the_device_is_abandoned_and_its_memory_freed(engine: Engine, msm_calls) -> None:
    (item,) = (synthesized(engine, c) for c in engine.writer.claim(1))
    worker = engine.workers[0]
    assert worker.occupy(item) and holds_memory(engine)

    cancel_job(ProofJob.objects.get(job_id="cancel-midway"))
    engine.sweep()  # what the engine's sweep thread does every 0.2 s
    assert not worker.launch(item)

    assert msm_calls == {"msm_g1": 0, "msm_g2": 0}, "the prover went on after the cancel"
    assert not holds_memory(engine) and not engine.inflight
    row = Partition.objects.get(pk=item.claim.partition_id)
    assert row.state == P.CANCELLED and row.proof is None


def test_a_proof_cancelled_while_finishing_is_not_verified_or_recorded(engine: Engine, msm_calls) -> None:
    (item,) = (synthesized(engine, c) for c in engine.writer.claim(1))
    worker = engine.workers[0]
    parked = park_finishes(engine)
    assert worker.occupy(item) and worker.launch(item) and parked == [item]
    assert msm_calls["msm_g1"] > 0  # the launch ran the G1 MSMs, and they were counted

    cancel_job(ProofJob.objects.get(job_id="cancel-midway"))
    engine.sweep()
    engine.finalizers.finish(item)

    assert msm_calls["msm_g2"] == 0, "the finisher went on after the cancel"
    assert not holds_memory(engine) and not engine.inflight
    assert Partition.objects.get(pk=item.claim.partition_id).state == P.CANCELLED
    assert ProofJob.objects.get(job_id="cancel-midway").state == JobState.CANCELLED
    assert engine.stats.completed == 0 and engine.stats.dropped == 1


def test_a_partition_cancelled_between_its_claim_and_synthesis_gives_its_memory_back(engine: Engine) -> None:
    (claim,) = engine.writer.claim(1)
    item = engine.adopt(claim)
    cancel_job(ProofJob.objects.get(job_id="cancel-midway"))

    engine.dispatcher.start(item)  # reserves memory, then finds its record cancelled

    assert not holds_memory(engine) and not engine.inflight
    assert engine.synthesis.active == 0


def test_a_partition_cancelled_during_synthesis_gives_its_memory_back(engine: Engine) -> None:
    from engine.pipeline.lifecycle import Phase, Start

    (claim,) = engine.writer.claim(1)
    item = engine.adopt(claim)
    engine.inflight.run(item, Start())  # reserved, recorded synthesizing, in a synthesis process
    assert item.state.phase is Phase.SYNTHESIZING and holds_memory(engine)
    cancel_job(ProofJob.objects.get(job_id="cancel-midway"))  # before the sweep has seen it

    engine.synthesis.collect_one()  # synthesized: its synth_done refused, so let go

    assert item.state.phase is Phase.DROPPED
    assert not holds_memory(engine) and not engine.inflight and len(engine.proof_queue) == 0
