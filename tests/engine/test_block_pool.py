"""The engine's handover blocks are kept between partitions (issue 45): the next partition's
synthesis writes into pages that exist, the pool's reservation always covers exactly the blocks
it has, and nothing can read another partition's assignment through a block it let go."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.pipeline import block_pool, handover
from engine.pipeline.block_pool import BlockPool
from engine.pipeline.handover import Blocks
from engine.pipeline.memory import MemoryManager
from engine.prover.r1cs import Assignment
from engine.status.holdings import HANDOVER_OWNER

MiB = 1 << 20


_EARLIER: set[Path] = set()


@pytest.fixture(autouse=True)
def _earlier_engines_blocks() -> None:
    """Kept blocks of engines other tests in this process left unstopped: not this test's."""
    _EARLIER.clear()
    _EARLIER.update(handover.root().glob(f"{handover.PREFIX}{os.getpid()}-kept-*"))


def pool_files() -> list[Path]:
    return sorted(set(handover.root().glob(f"{handover.PREFIX}{os.getpid()}-kept-*")) - _EARLIER)


def test_a_block_let_go_is_lent_to_the_next_partition_with_its_pages() -> None:
    memory = MemoryManager(64 * MiB)
    pool = BlockPool(memory)
    first = pool.lend(witness_rows=1024, domain_rows=4096)
    first.abc.view(3 * 4096)[:] = 5  # its synthesis wrote every page
    paths = (first.witness.path, first.abc.path)
    first.free()
    second = pool.lend(witness_rows=1024, domain_rows=4096)
    try:
        assert (second.witness.path, second.abc.path) == paths
        assert os.stat(second.abc.path).st_blocks * 512 >= 3 * 4096 * 32  # its pages are still there
        assert memory.snapshot()["by_owner"] == {HANDOVER_OWNER: second.kept_nbytes}  # reserved once, not twice
    finally:
        second.free()
        pool.close()
    assert not pool_files() and memory.used == 0


def test_a_view_still_alive_reads_zeros_and_never_the_next_partition_s_assignment() -> None:
    pool = BlockPool(MemoryManager(64 * MiB))
    first = pool.lend(witness_rows=16, domain_rows=4096)
    stale = first.abc.view(4096)  # a reader that still holds its view when the partition lets go
    stale[:] = 1
    first.free_abc()
    second = pool.lend(witness_rows=16, domain_rows=4096)
    assert second.abc.path == first.abc.path  # the same block, lent again
    second.abc.view(4096)[:] = 2
    assert not stale.any()
    first.free()
    second.free()
    pool.close()
    assert not pool_files()


def test_memory_running_short_frees_the_blocks_at_rest_first() -> None:
    memory = MemoryManager(8 * MiB)
    pool = BlockPool(memory)
    pool.lend(witness_rows=1024, domain_rows=16384).free()  # 1.5 MiB at rest
    held = memory.snapshot()["by_owner"][HANDOVER_OWNER]
    assert held > 0 and pool.at_rest() == 2
    taken = memory.acquire("a partition", 8 * MiB - held // 2, timeout=1)
    assert pool.at_rest() < 2 and not any(p.exists() for p in pool_files()[pool.at_rest():])
    taken.release()
    pool.close()
    assert memory.used == 0


def test_the_pool_makes_a_block_only_when_none_of_its_size_rests() -> None:
    memory = MemoryManager(64 * MiB)
    pool = BlockPool(memory)
    for blocks in [pool.lend(witness_rows=64, domain_rows=64) for _ in range(3)]:
        blocks.free()
    made = pool_files()
    again = [pool.lend(witness_rows=64, domain_rows=64) for _ in range(3)]
    assert pool_files() == made and pool.at_rest() == 0  # three partitions at once: the three pairs
    for blocks in again:
        blocks.free()
    assert pool.at_rest() == 6
    assert memory.snapshot()["by_owner"][HANDOVER_OWNER] == sum(p.stat().st_size for p in pool_files())
    assert pool.expire(rested_seconds=0.0) == 6
    assert not pool_files() and memory.used == 0


def test_the_block_let_go_last_is_lent_first_and_the_spare_ones_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst left three pairs; one partition at a time then keeps taking the same pair, so
    the other two rest untouched and are freed once they have rested long."""
    now = [0.0]
    monkeypatch.setattr(block_pool, "time", SimpleNamespace(monotonic=lambda: now[0]))
    pool = BlockPool(MemoryManager(64 * MiB))
    burst = [pool.lend(witness_rows=64, domain_rows=64) for _ in range(3)]
    for blocks in burst:
        blocks.free()
    last = (burst[-1].witness.path, burst[-1].abc.path)
    for _ in range(5):
        now[0] += 10.0
        blocks = pool.lend(witness_rows=64, domain_rows=64)
        assert (blocks.witness.path, blocks.abc.path) == last
        blocks.free()
    assert pool.expire(rested_seconds=30.0) == 4  # the burst's two other pairs, at rest for 50 s
    assert {p.name for p in pool_files()} == {p.name for p in last}
    pool.close()


def test_a_block_lent_when_the_pool_closes_is_freed_when_it_comes_back() -> None:
    memory = MemoryManager(64 * MiB)
    pool = BlockPool(memory)
    lent = pool.lend(witness_rows=64, domain_rows=64)
    pool.close()
    assert len(pool_files()) == 2
    lent.free()
    assert not pool_files() and memory.used == 0


class Lending(RuleBasedStateMachine):
    """Partitions of two sizes borrow and let go (the a/b/c block first, as the device takes
    it), memory runs short, blocks expire: the pool's reservation is always exactly the bytes of
    the blocks on disk, no block is lent twice at once, and the pool never has more blocks of a
    size than it once had lent at the same time."""

    def __init__(self) -> None:
        super().__init__()
        self.memory = MemoryManager(256 * MiB)
        self.pool = BlockPool(self.memory)
        self.lent: list[Blocks] = []
        self.abc_gone: set[int] = set()
        self.most_lent: Counter[int] = Counter()  # by block size: the most lent at one time

    @rule(size=st.sampled_from([(16, 64), (128, 1024)]))
    def lend(self, size: tuple[int, int]) -> None:
        self.lent.append(self.pool.lend(*size))
        self.most_lent |= self.lent_now()

    def lent_now(self) -> Counter[int]:
        return Counter([b.witness.nbytes for b in self.lent]
                       + [b.abc.nbytes for b in self.lent if id(b) not in self.abc_gone])

    @precondition(lambda self: self.lent)
    @rule(pick=st.integers(min_value=0), abc_only=st.booleans())
    def let_go(self, pick: int, abc_only: bool) -> None:
        blocks = self.lent[pick % len(self.lent)]
        if abc_only:
            blocks.free_abc()
            self.abc_gone.add(id(blocks))
        else:
            blocks.free()
            self.lent.remove(blocks)
            self.abc_gone.discard(id(blocks))

    @rule(short=st.integers(min_value=1, max_value=4 * MiB))
    def memory_runs_short(self, short: int) -> None:
        self.pool.evict(short)

    @rule()
    def rested_long(self) -> None:
        self.pool.expire(rested_seconds=0.0)

    @invariant()
    def reserved_is_what_is_on_disk(self) -> None:
        on_disk = sum(p.stat().st_size for p in pool_files())
        assert self.memory.snapshot()["by_owner"].get(HANDOVER_OWNER, 0) == on_disk == self.pool.held_bytes()

    @invariant()
    def no_block_is_lent_twice(self) -> None:
        paths = [b.witness.path for b in self.lent]
        paths += [b.abc.path for b in self.lent if id(b) not in self.abc_gone]
        assert len(paths) == len(set(paths))

    @invariant()
    def never_more_blocks_of_a_size_than_were_lent_at_once(self) -> None:
        had = Counter(p.stat().st_size for p in pool_files())
        assert all(had[size] <= self.most_lent[size] for size in had)
        assert sum(had.values()) == self.lent_now().total() + self.pool.at_rest()

    def teardown(self) -> None:
        for blocks in self.lent:
            blocks.free()
        self.pool.close()
        assert not pool_files() and self.memory.used == 0


TestLending = Lending.TestCase
TestLending.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


def test_written_pages_are_what_the_next_reader_of_the_same_partition_sees() -> None:
    """Lent again, a block holds what its new partition's synthesis wrote, byte for byte."""
    pool = BlockPool(MemoryManager(64 * MiB))
    pool.lend(witness_rows=8, domain_rows=8).free()
    blocks = pool.lend(witness_rows=8, domain_rows=8)
    made = np.arange(32, dtype=np.uint64).reshape(8, 4)
    written = handover.write(blocks.spec, Assignment(curve="bls12381", witness=made, a=made, b=made, c=made,
                                                     n_public=1), seconds=0.0)
    read = blocks.assignment(written)
    assert np.array_equal(read.witness, made) and np.array_equal(read.c, made)
    del read
    blocks.free()
    pool.close()



def test_a_synthesis_process_keeps_a_kept_block_mapped_until_the_engine_frees_it() -> None:
    pool = BlockPool(MemoryManager(64 * MiB))
    blocks = pool.lend(witness_rows=8, domain_rows=8)
    assert blocks.spec.kept
    first = handover.views(blocks.spec, 8, 8)
    again = handover.views(blocks.spec, 8, 8)
    assert first[0].base is not None and np.shares_memory(first[0], again[0])  # one mapping, not two
    assert blocks.spec.witness_path in handover._KEPT._maps
    del first, again
    blocks.free()
    pool.close()  # the pool frees its blocks at rest: truncated and unlinked
    other = Blocks.made("test-kept-gone", witness_rows=1, domain_rows=1)
    handover.views(kept_spec(other), 1, 1)  # the next synthesis forgets what is gone
    assert blocks.spec.witness_path not in handover._KEPT._maps
    other.free()


def kept_spec(blocks: Blocks) -> handover.BlockSpec:
    from dataclasses import replace

    return replace(blocks.spec, kept=True)


def test_the_engine_s_resident_figure_leaves_out_shared_memory_it_reserves_elsewhere() -> None:
    from engine.pipeline.host import tree_rss

    blocks = Blocks.made("test-rss", witness_rows=1, domain_rows=64 * 1024)  # 6 MiB of a/b/c
    try:
        before = tree_rss([os.getpid()])
        blocks.abc.view(3 * 64 * 1024)[:] = 1  # every page resident in this process
        assert tree_rss([os.getpid()]) - before < 2 * MiB
    finally:
        blocks.free()
