"""Many jobs of every kind through real proving at scale tiny, with a budget too small to
hold every proving key at once and several workers. At every committed version the records
and the memory manager must agree with the design's invariants."""

from __future__ import annotations

import threading

import pytest
from django.db.models import Count

from engine.circuits.kinds import SIZES, circuit_for, validate_inputs
from engine.ledger.clock import Stamp
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.models import Partition, ProofJob
from engine.pipeline import keys
from engine.states import JobState, PartitionState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
P = PartitionState
MIX = [("winning-post", 4), ("window-post", 4), ("porep-c2", 1), ("snap-update", 1)]


def submit_mix() -> list[ProofJob]:
    jobs = []
    for kind, count in MIX:
        for i in range(count):
            raw = demo_inputs(kind, window_partitions=1 + i % 3)
            inputs, n = validate_inputs(kind, raw)
            job, _ = submit_job(kind=kind, job_id=f"stress-{kind}-{i}", inputs=inputs, num_partitions=n,
                                circuit_id=f"{kind}/tiny", scale="tiny")
            jobs.append(job)
    return jobs


class Invariants:
    """Checked after every commit of the host's writer, under its lock (a consistent view)."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.broken: list[str] = []
        self.checked = 0
        self.lock = threading.Lock()

    def __call__(self, stamp: Stamp) -> None:
        version = stamp.version
        memory = self.engine.memory
        if memory.used > memory.budget or sum(memory.by_owner.values()) != memory.used:
            self.broken.append(f"v{version}: reserved {memory.used} of {memory.budget}")
        in_gpu = Partition.objects.filter(state=P.GPU)
        if in_gpu.filter(worker__isnull=True).exists():
            self.broken.append(f"v{version}: a gpu partition without a worker")
        doubled = in_gpu.values("worker").annotate(n=Count("id")).filter(n__gt=1)
        if doubled.exists():
            self.broken.append(f"v{version}: a worker with two partitions in gpu: {list(doubled)}")
        self.checked += 1


def test_a_mixed_backlog_keeps_every_invariant_at_every_version(start_engine) -> None:
    jobs = submit_mix()
    # Four tiny keys are reserved at 7.7 MB with their matrices and fixed-base tables
    # (snap-update's 2.5 MB the most, 3.9 MB with one of its partitions): 4.5 MB forces
    # evictions and memory waits all along. Beside them the engine holds what is no key's:
    # each synthesis process's compiled matrices (snap-update's the most) and, while a key
    # loads, its zkey's size (snap-update's the largest).
    compiled = max(circuit_for(kind, "tiny").compiled_bytes for kind in SIZES)
    loading = max(keys.load_transient_bytes(f"{kind}/tiny") or 0 for kind in SIZES)
    budget = 4_500_000 + 2 * compiled + (loading or 1_100_000)  # 1.1 MB: snap-update's zkey, before it is made
    engine = start_engine(budget=str(budget), synthesis=2, workers_per_device=3)
    invariants = Invariants(engine)
    engine.writer.listeners.append(invariants)
    assert engine.run_until_idle(timeout=150)

    assert not invariants.broken, invariants.broken[:5]
    assert invariants.checked > 50
    parts = Partition.objects.filter(job__in=jobs)
    for job in ProofJob.objects.filter(pk__in=[j.pk for j in jobs]):
        # Evictions and memory waits may slow a job, never fail it: every one must be proved.
        assert job.state == JobState.DONE, f"{job.job_id} ended {job.state}: {job.error}"
    assert set(parts.values_list("state", flat=True)) == {P.DONE}  # none lost, none failed
    done = parts.filter(state=P.DONE)
    assert engine.stats.completed == done.count()  # every done write came from exactly one proof
    assert not done.filter(proof__isnull=True).exists()
    assert engine.memory.peak <= engine.memory.budget
    assert engine.keycache.evictions > 0  # the budget really was short: idle keys made room
