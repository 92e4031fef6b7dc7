"""A synthesized partition reaches the prover through shared memory (issue 45): its synthesis
process writes the assignment into blocks the engine made inside the partition's reservation,
and the engine reads it in place; nothing but a few numbers goes back through the pool's pipe.
"""

from __future__ import annotations

import mmap
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.pipeline import handover
from engine.pipeline.handover import Blocks, HandoverError, Written, write
from engine.prover.r1cs import Assignment
from engine.status.holdings import HANDOVER_OWNER


def assignment(n_vars: int = 7, n: int = 5, seed: int = 1) -> Assignment:
    rng = np.random.default_rng(seed)
    rows = lambda k: rng.integers(0, 2**63, size=(k, 4), dtype=np.uint64)  # noqa: E731
    return Assignment(curve="bls12381", witness=rows(n_vars), a=rows(n), b=rows(n), c=rows(n), n_public=2)


def mapped(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a memory mapping (not a copy of its own)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_what_the_synthesis_writes_is_read_in_place_byte_for_byte() -> None:
    made = assignment()
    blocks = Blocks.made("test-roundtrip", witness_rows=7, domain_rows=8)
    try:
        written = write(blocks.spec, made, seconds=0.25)
        assert len(pickle.dumps(written)) < 300  # what goes back through the pipe: sizes, not arrays
        read = blocks.assignment(written)
        for name in ("witness", "a", "b", "c"):
            assert np.array_equal(getattr(read, name), getattr(made, name)), name
            assert mapped(getattr(read, name)), f"{name} was copied"
        assert read.n_public == 2 and read.curve == "bls12381" and written.seconds == 0.25
    finally:
        blocks.free()
    assert not Path(blocks.spec.witness_path).exists() and not Path(blocks.spec.abc_path).exists()


def test_an_assignment_larger_than_its_reservation_is_refused() -> None:
    blocks = Blocks.made("test-too-large", witness_rows=6, domain_rows=8)
    try:
        with pytest.raises(HandoverError, match="7 signals"):
            write(blocks.spec, assignment(n_vars=7), seconds=0.0)
    finally:
        blocks.free()


def test_freeing_the_abc_block_gives_its_pages_back_while_a_view_is_still_held() -> None:
    made = assignment(n_vars=4, n=4096)
    blocks = Blocks.made("test-free-abc", witness_rows=4, domain_rows=4096)
    read = blocks.assignment(write(blocks.spec, made, seconds=0.0))
    blocks.free_abc()  # the device has a, b, c: their pages go now, whoever still holds a view
    assert not Path(blocks.spec.abc_path).exists()
    assert not read.a.any()  # the pages were given back: a view reads zeros
    assert np.array_equal(read.witness, made.witness)  # the witness stays until the proof is finished
    blocks.free()


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="posix_fallocate is Linux's")
def test_a_partition_s_blocks_hold_their_pages_from_the_moment_they_are_reserved() -> None:
    blocks = Blocks.made("test-allocated", witness_rows=1024, domain_rows=4096)
    try:
        for path, rows in ((blocks.spec.witness_path, 1024), (blocks.spec.abc_path, 3 * 4096)):
            assert os.stat(path).st_blocks * 512 >= rows * 32  # allocated, not a sparse file
    finally:
        blocks.free()


def test_blocks_left_by_a_dead_engine_are_removed_by_the_next_one() -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has exited
    left = handover.root() / f"{handover.PREFIX}{pid}-99-1-w"
    left.write_bytes(b"\0" * 64)
    mine = Blocks.made("test-mine", witness_rows=1, domain_rows=1)  # this process is alive: kept
    try:
        assert handover.remove_orphans() >= 1
        assert not left.exists() and Path(mine.spec.witness_path).exists()
    finally:
        mine.free()


@pytest.mark.django_db(transaction=True)
def test_an_engine_s_partition_comes_back_from_its_synthesis_process_as_a_few_numbers(
        start_engine, monkeypatch) -> None:
    from engine.pipeline.synthesize import Synthesis
    from tests.engine.test_drain import winning_post

    results: list[Any] = []
    views: list[bool] = []
    inside: list[bool] = []
    real = Synthesis.collect

    def collect(self: Synthesis, item: Any, future: Any, arrived: Any = None) -> None:
        results.append(future.result())
        spec = item.held.blocks.spec  # the blocks are inside what the partition and the block pool reserved
        inside.append(os.path.getsize(spec.witness_path) + os.path.getsize(spec.abc_path)
                      <= item.held.reservation.nbytes + item.held.blocks.kept_nbytes)
        real(self, item, future, arrived)
        if item.synthesized is not None:
            views.append(all(mapped(getattr(item.synthesized.assignment, n)) for n in ("witness", "a", "b", "c")))

    monkeypatch.setattr(Synthesis, "collect", collect)
    before = set(handover.root().glob(f"{handover.PREFIX}{os.getpid()}-*"))  # earlier tests' engines'
    engine = start_engine()
    job = winning_post("handed-over")
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == "done" and job.verified, job.error
    assert [type(r) for r in results] == [Written] and views == [True] and inside == [True]
    assert len(pickle.dumps(results[0])) < 300
    # every block given back with the partition: at rest in the engine's pool, under its reservation
    left = set(handover.root().glob(f"{handover.PREFIX}{os.getpid()}-*")) - before
    assert len(left) == engine.blocks.at_rest() == 2
    assert sum(path.stat().st_size for path in left) == engine.memory.snapshot()["by_owner"][HANDOVER_OWNER]
    engine.stop(drain_seconds=5)
    assert not set(handover.root().glob(f"{handover.PREFIX}{os.getpid()}-*")) - before


@pytest.mark.django_db(transaction=True)
def test_the_recorded_synthesis_spans_the_work_its_process_did_and_ends_before_the_answer_arrived(
        start_engine, monkeypatch) -> None:
    from django.utils import timezone

    from engine.models import Partition
    from engine.pipeline.synthesize import Synthesis
    from tests.engine.test_drain import winning_post

    seen: list[tuple[float, Any]] = []  # (the process's own seconds, when the answer arrived)
    real = Synthesis.collect

    def collect(self: Synthesis, item: Any, future: Any, arrived: Any = None) -> None:
        seen.append((future.result().seconds, arrived))
        real(self, item, future, arrived)

    monkeypatch.setattr(Synthesis, "collect", collect)
    engine = start_engine()
    job = winning_post("recorded-span")
    assert engine.run_until_idle(timeout=120)
    (part,) = Partition.objects.filter(job=job)
    ((seconds, arrived),) = seen
    assert part.synth_started_at is not None and part.synth_finished_at is not None
    assert (part.synth_finished_at - part.synth_started_at).total_seconds() >= seconds  # the work fits inside
    assert part.synth_finished_at <= arrived <= timezone.now()
