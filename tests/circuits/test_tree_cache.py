"""Sector trees built once per host: stored under the cache directory, read back whole by every
process that proves the sector, never trusted when their file does not match."""

from __future__ import annotations

import multiprocessing
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.circuits import kinds, tree_cache
from engine.circuits.merkle import SectorTree


def _forget_built_trees() -> None:
    """As a process that never built a tree: its own caches empty."""
    kinds._sector.cache_clear()
    kinds._snap_trees.cache_clear()


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    before = tree_cache.use_tree_cache(tmp_path)
    _forget_built_trees()
    try:
        yield tmp_path / "trees"
    finally:
        tree_cache.use_tree_cache(before)
        _forget_built_trees()


def _same(a: SectorTree, b: SectorTree) -> bool:
    return (a.depth, a.tile, a.levels, a.upper) == (b.depth, b.tile, b.levels, b.upper)


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(0, 12), tile=st.integers(0, 6), seed=st.integers(0, 2**64))
def test_a_tree_comes_back_from_its_bytes_node_for_node(depth: int, tile: int, seed: int) -> None:
    tree = SectorTree(depth, lambda i: seed * 31 + i, tile_depth=tile)
    assert _same(SectorTree.from_bytes(tree.to_bytes()), tree)


def test_bytes_that_are_not_a_whole_tree_are_refused() -> None:
    data = SectorTree(5, lambda i: i, tile_depth=3).to_bytes()
    with pytest.raises(ValueError, match="not a tree"):
        SectorTree.from_bytes(data[:-32])


def test_a_sector_read_back_by_another_process_is_the_tree_it_built(cache: Path) -> None:
    seed = secrets.token_hex(32)
    built = kinds._sector(seed, 20)
    assert len(list(cache.glob("*.tree"))) == 1
    _forget_built_trees()
    assert _same(kinds._sector(seed, 20), built)


def test_a_snap_update_s_new_tree_is_shared_too_and_reads_back_the_same(cache: Path) -> None:
    seeds = [secrets.token_hex(32) for _ in range(3)]
    old, new, rho = kinds._snap_trees(*seeds, 7)
    assert len(list(cache.glob("*.tree"))) == 2
    _forget_built_trees()
    old_again, new_again, rho_again = kinds._snap_trees(*seeds, 7)
    assert _same(old_again, old) and _same(new_again, new) and rho_again == rho


def test_a_key_is_built_once_however_often_it_is_asked_for(cache: Path) -> None:
    builds: list[int] = []

    def build() -> SectorTree:
        builds.append(1)
        return SectorTree(6, lambda i: i, tile_depth=4)

    trees = [tree_cache.cached("k", build, SectorTree.to_bytes, SectorTree.from_bytes) for _ in range(3)]
    assert len(builds) == 1
    assert all(_same(tree, trees[0]) for tree in trees)


def _sector_in_a_process(cache_dir: str, seed: str, start: Any) -> tuple[bool, int]:
    """(whether this process built the tree, its root): the build is the real one, timed by
    nothing but the others waiting on it."""
    tree_cache.use_tree_cache(cache_dir)
    kinds.SectorTree = _Counting  # type: ignore[misc]
    start.wait()
    root = kinds._sector(seed, 16).root
    return _Counting.builds > 0, root


class _Counting(SectorTree):
    """A SectorTree that counts its builds in this process (one read back is not built)."""

    builds = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Counting.builds += 1
        super().__init__(*args, **kwargs)


def test_processes_asking_for_one_sector_at_once_build_it_once_and_agree(cache: Path) -> None:
    seed = secrets.token_hex(32)
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        start = manager.Event()
        with context.Pool(3) as pool:
            pending = pool.starmap_async(_sector_in_a_process, [(str(cache.parent), seed, start)] * 3)
            start.set()
            answers = pending.get(timeout=120)
    assert sum(built for built, _ in answers) == 1
    assert len({root for _, root in answers}) == 1


def test_a_damaged_file_is_rebuilt_not_trusted(cache: Path) -> None:
    seed = secrets.token_hex(32)
    built = kinds._sector(seed, 12)
    (path,) = cache.glob("*.tree")
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the last node's top byte: a different field element
    path.write_bytes(bytes(data))
    _forget_built_trees()
    assert _same(kinds._sector(seed, 12), built)
    assert path.read_bytes() != bytes(data)  # and stored again whole


def test_a_file_stored_for_another_key_is_not_read_for_this_one(cache: Path) -> None:
    one, other = secrets.token_hex(32), secrets.token_hex(32)
    kinds._sector(one, 12)
    (path,) = cache.glob("*.tree")
    foreign = path.read_bytes()
    kinds._sector(other, 12)
    for stored in cache.glob("*.tree"):  # both names now hold ``one``'s tree
        stored.write_bytes(foreign)
    _forget_built_trees()
    tree_cache.use_tree_cache(None)
    expected = kinds._sector(other, 12)
    _forget_built_trees()
    tree_cache.use_tree_cache(cache.parent)
    assert _same(kinds._sector(other, 12), expected)


def test_a_cache_that_cannot_be_written_costs_only_the_build(cache: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    tree_cache.use_tree_cache(blocker)  # its trees/ cannot be made
    seed = secrets.token_hex(32)
    tree = kinds._sector(seed, 12)
    _forget_built_trees()
    tree_cache.use_tree_cache(None)
    assert _same(kinds._sector(seed, 12), tree)


def test_once_more_than_a_few_trees_pile_up_only_the_newest_are_kept(cache: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_cache, "MAX_TREES", 3)
    monkeypatch.setattr(tree_cache, "PRUNE_AFTER", 2)
    seeds = [secrets.token_hex(32) for _ in range(6)]
    for seed in seeds[:5]:
        kinds._sector(seed, 4)
    assert len(list(cache.glob("*.tree"))) == 5  # within the slack: nothing statted, nothing removed
    kinds._sector(seeds[5], 4)
    assert len(list(cache.glob("*.tree"))) == 3
    assert len(list(cache.glob("*.lock"))) == 3


def test_a_value_stored_whole_that_is_not_a_tree_is_rebuilt(cache: Path) -> None:
    tree_cache.cached("k", lambda: b"not a tree", bytes, bytes)
    tree = tree_cache.cached("k", lambda: SectorTree(6, lambda i: i, tile_depth=4), SectorTree.to_bytes,
                             SectorTree.from_bytes)
    assert _same(tree, SectorTree(6, lambda i: i, tile_depth=4))
    assert _same(SectorTree.from_bytes(tree_cache.cached("k", bytes, bytes, bytes)), tree)  # and stored again
