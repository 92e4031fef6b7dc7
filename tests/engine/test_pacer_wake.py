"""The pacer looks again as soon as a worker takes a synthesized partition: a claim held back
because enough synthesized work was waiting for the device goes in when the device takes one,
not at the end of the pacer's wait (on a tiny circuit that wait left the device idle)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from engine.pipeline.prove import ProofQueue

pytestmark = pytest.mark.django_db(transaction=True)


def waiting(order: int) -> Any:
    """A synthesized partition as the proof queue sees it: its place, its claim, its key."""
    return SimpleNamespace(order=order, claim=SimpleNamespace(partition_id=order), key=None, abandoned=lambda: False)


def test_the_proof_queue_tells_each_take_and_nothing_else() -> None:
    told: list[int] = []
    queue = ProofQueue(on_taken=lambda: told.append(1))
    queue.put(waiting(1))
    queue.put(waiting(2))
    assert told == []  # a partition arriving gives the pacer no room
    assert queue.take(timeout=0.01) is not None
    assert told == [1]
    assert queue.take(timeout=0.01, accepts=lambda item: False) is None  # nothing left for this lane
    assert told == [1]


def test_an_engine_s_workers_taking_partitions_wake_its_pacer(start_engine: Any) -> None:
    engine = start_engine()
    assert engine.proof_queue.on_taken == engine.synthesis.nudge
