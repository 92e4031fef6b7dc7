"""Merkle inclusion: binary Poseidon trees, natively and in circuit.

Sector trees are periodic so that deep sectors (depth 30+, as Filecoin's 32 GiB sectors)
never need materialising: a sector of depth D repeats a tile of 2^T leaves (T = min(D,
TILE_DEPTH)), so every node above level T has two equal children. Only the tile's tree
(2^(T+1) − 1 hashes) and D − T hashes above it are computed; any challenged path is then a
lookup. The circuit does not know or use the periodicity: it proves full D-level paths.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import numpy as np

from engine.circuits.cs import ConstraintSystem, ints_to_limbs, limbs_to_ints
from engine.circuits.gadgets import conditional_swap
from engine.circuits.poseidon import Hash2Many, hash2, hash2_gadget, hash2_many

TILE_DEPTH = 10


class SectorTree:
    """A depth-D Poseidon tree over leaf(i) for i < 2^D, with leaf(i) = leaf(i mod 2^T).

    ``leaf`` is the function, or the tile's 2^T leaves themselves; a level is hashed in one
    call of ``hashes`` (natively by default)."""

    def __init__(self, depth: int, leaf: Callable[[int], int] | Sequence[int], tile_depth: int = TILE_DEPTH, *,
                 hashes: Hash2Many = hash2_many) -> None:
        self.depth = depth
        self.tile = min(depth, tile_depth)
        level = [leaf(i) for i in range(1 << self.tile)] if callable(leaf) else list(leaf)
        if len(level) != 1 << self.tile:
            raise ValueError(f"a tile of depth {self.tile} has {1 << self.tile} leaves, not {len(level)}")
        self.levels: list[list[int]] = [level]
        for _ in range(self.tile):
            level = hashes(level[0::2], level[1::2])
            self.levels.append(level)
        # Above the tile every level is a single repeated node: H(n, n).
        self.upper = [level[0]]
        for _ in range(depth - self.tile):
            self.upper.extend(hashes(self.upper[-1:], self.upper[-1:]))

    @property
    def root(self) -> int:
        return self.upper[-1]

    def to_bytes(self) -> bytes:
        """Depth, tile, then every node (the tile's levels bottom first, then the upper ones),
        32 bytes little-endian each: what engine.circuits.tree_cache stores."""
        nodes = [node for level in self.levels for node in level] + self.upper
        return struct.pack("<II", self.depth, self.tile) + ints_to_limbs(nodes).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> SectorTree:
        depth, tile = struct.unpack_from("<II", data)
        sizes = [1 << (tile - level) for level in range(tile + 1)] + [depth - tile + 1] if tile <= min(depth, 40) else []
        if not sizes or len(data) != 8 + 32 * sum(sizes):
            raise ValueError(f"{len(data)} bytes are not a tree of depth {depth} over a tile of depth {tile}")
        nodes = limbs_to_ints(np.frombuffer(data, dtype="<u8", offset=8))
        tree = cls.__new__(cls)
        tree.depth, tree.tile, tree.levels = depth, tile, []
        start = 0
        for size in sizes:
            tree.levels.append(nodes[start:start + size])
            start += size
        tree.upper = tree.levels.pop()
        return tree

    def leaf(self, index: int) -> int:
        return self.levels[0][index & ((1 << self.tile) - 1)]

    def siblings(self, index: int) -> list[int]:
        """The D siblings of leaf ``index``, bottom level first."""
        pos = index & ((1 << self.tile) - 1)
        out = [self.levels[lvl][(pos >> lvl) ^ 1] for lvl in range(self.tile)]
        out.extend(self.upper[: self.depth - self.tile])
        return out


def root_from_path(leaf: int, index: int, siblings: list[int]) -> int:
    """Native recomputation of the root from a leaf, its index and its siblings."""
    node = leaf
    for lvl, sib in enumerate(siblings):
        node = hash2(sib, node) if (index >> lvl) & 1 else hash2(node, sib)
    return node


def merkle_root_gadget[Term](cs: ConstraintSystem[Term], leaf: Term, bits: list[Term], siblings: list[int]) -> Term:
    """Allocate the siblings and hash the leaf up the tree; bit i set means the node is a right child."""
    node = leaf
    for bit, sib_value in zip(bits, siblings, strict=True):
        sib = cs.alloc(sib_value)
        left, right = conditional_swap(cs, bit, node, sib)
        node = hash2_gadget(cs, left, right)
    return node
