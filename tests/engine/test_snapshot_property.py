"""Property: whatever order the writer moves partitions in, and however reads interleave with
the writes, every snapshot read of the farm keeps the invariants, and the database refuses
the one write that would break them (a second partition onto a busy worker)."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.ledger.claims import Claim
from engine.ledger.jobs import submit_job
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import PartitionState
from engine.status.farm import farm_snapshot
from tests.truth import status_contradictions

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
P = PartitionState
WALK = [P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING, P.DONE]
PARTITIONS, WORKERS = 4, 2


class Reader(threading.Thread):
    """Reads snapshots back to back on its own connection while the writer works."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.found: list[str] = []
        self.reads = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.found += status_contradictions(farm_snapshot())
                self.reads += 1
        finally:
            connection.close()


def fresh_farm() -> tuple[StatusWriter, list[Worker], list[Claim]]:
    ProofJob.objects.all().delete()
    EngineHost.objects.all().delete()
    host = EngineHost.objects.create(name="prop-host")
    workers = [Worker.objects.create(host=host, device="cpu", ordinal=i) for i in range(WORKERS)]
    submit_job(kind="porep-c2", job_id="prop-job", inputs={}, num_partitions=PARTITIONS)
    writer = StatusWriter(host)
    claims = sorted(writer.claim(PARTITIONS), key=lambda c: c.partition_id)
    return writer, workers, claims


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, PARTITIONS - 1), st.integers(0, WORKERS - 1)), max_size=30))
def test_snapshot_reads_keep_the_invariants_under_any_interleaving(steps: list[tuple[int, int]]) -> None:
    writer, workers, claims = fresh_farm()
    progress = [0] * PARTITIONS
    on_worker: dict[int, int] = {}  # worker index → partition index now in gpu on it
    reader = Reader()
    reader.start()
    try:
        for part, w in steps:
            if progress[part] == len(WALK):
                continue
            target = WALK[progress[part]]
            fields = {"worker": workers[w]} if target == P.GPU else {}
            if target == P.GPU and w in on_worker:
                with pytest.raises(IntegrityError):  # the database keeps one partition per worker
                    writer.apply(Transition(claims[part], target, fields))
                continue
            writer.apply(Transition(claims[part], target, fields))
            progress[part] += 1
            if target == P.GPU:
                on_worker[w] = part
            elif target == P.FINALIZING:
                on_worker = {k: v for k, v in on_worker.items() if v != part}
            snap = farm_snapshot()
            assert status_contradictions(snap) == []
            proving = {(x["label"], x["current_partition"]) for x in snap["gpu_workers"] if x["state"] == "proving"}
            assert proving == {(f"W{k}", v) for k, v in on_worker.items()}
    finally:
        reader.stop.set()
        reader.join(timeout=30)
    assert reader.found == []
    assert Partition.objects.filter(state=P.GPU).count() == len(on_worker)
