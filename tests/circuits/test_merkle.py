"""Sector trees (hashed natively, held to the Python hash) and the Merkle inclusion gadget."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.circuits.cs import ShapeCS, WitnessCS
from engine.circuits.gadgets import alloc_bits, enforce_packing
from engine.circuits.merkle import SectorTree, merkle_root_gadget, root_from_path
from engine.circuits.poseidon import hash2, hash2_many_python
from engine.circuits.synthesis import check_satisfied, matvec
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.r1cs import Assignment


def _naive_root(leaves: list[int]) -> int:
    level = leaves
    while len(level) > 1:
        level = [hash2(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def test_periodic_sector_root_equals_the_fully_materialised_tree() -> None:
    tree = SectorTree(4, lambda i: 1000 + i, tile_depth=2)
    assert tree.root == _naive_root([1000 + (i % 4) for i in range(16)])


def test_every_leaf_path_leads_to_the_root() -> None:
    tree = SectorTree(4, lambda i: 7 * i + 3, tile_depth=3)
    for index in range(16):
        assert root_from_path(tree.leaf(index), index, tree.siblings(index)) == tree.root


def _inclusion(cs, tree: SectorTree, index: int, leaf: int, root: int) -> None:
    pub_root = cs.alloc_public(root)
    pub_index = cs.alloc_public(index)
    bits = alloc_bits(cs, index, tree.depth)
    enforce_packing(cs, bits, pub_index)
    cs.enforce_equal(merkle_root_gadget(cs, cs.alloc(leaf), bits, tree.siblings(index)), pub_root)


def _check(tree: SectorTree, index: int, leaf: int, root: int) -> None:
    shape = ShapeCS()
    _inclusion(shape, tree, 0, 0, 0)
    r1cs = shape.compile()
    cs = WitnessCS()
    _inclusion(cs, tree, index, leaf, root)
    w = cs.witness()
    a, b, c = (matvec(r1cs.curve, m, w) for m in (r1cs.a, r1cs.b, r1cs.c))
    check_satisfied(r1cs, Assignment(curve=r1cs.curve, witness=w, a=a, b=b, c=c, n_public=2))


def test_gadget_proves_inclusion_at_every_position() -> None:
    tree = SectorTree(3, lambda i: i * i + 1)
    for index in range(8):
        _check(tree, index, tree.leaf(index), tree.root)


def test_gadget_rejects_a_leaf_from_another_position() -> None:
    tree = SectorTree(3, lambda i: i * i + 1)
    with pytest.raises(UnsatisfiedConstraint, match=r"constraint \d+ not satisfied"):
        _check(tree, 5, tree.leaf(4), tree.root)


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(1, 12), tile=st.integers(1, 5), seed=st.integers(0, 2**32))
def test_a_tree_hashed_natively_is_the_tree_hashed_in_python(depth: int, tile: int, seed: int) -> None:
    rng = random.Random(seed)
    leaves = [rng.randrange(2**256) for _ in range(1 << min(depth, tile))]
    native = SectorTree(depth, leaves, tile_depth=tile)
    python = SectorTree(depth, leaves, tile_depth=tile, hashes=hash2_many_python)
    assert (native.levels, native.upper) == (python.levels, python.upper)


def test_a_tile_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="a tile of depth 2 has 4 leaves, not 3"):
        SectorTree(5, [1, 2, 3], tile_depth=2)
