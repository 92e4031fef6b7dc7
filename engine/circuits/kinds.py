"""The four proof kinds as circuit families over BLS12-381.

Every kind proves, per partition, C challenged leaves of a sector tree of depth D against
the public root (Poseidon ``poseidonperm_x5_255_3`` two-to-one, see ``poseidon.py``):

* position bits, each boolean, packed to equal the public challenge index;
* per level: the sibling (private), a conditional swap on the bit, Poseidon(left, right);
* the last node equal to the public root.

``snap-update`` proves an update of a sector: for each challenge the old leaf is in the old
tree (public ``comm_old``), the new leaf is in the new tree (public ``comm_new``) and
new = old + rho · data (public ``rho``, private data leaf) — one shared set of position bits.

Inputs (what a client sends; hex strings are 64 hex digits, read as big-endian integers
reduced mod r):

* every kind: ``sector_seed``, ``randomness``;
* ``window-post``: optional ``partitions`` (1..MAX_WINDOW_POST_PARTITIONS, default 1);
* ``snap-update``: ``data_seed`` (the new data written into the sector).

Derivation (all Poseidon, all reproducible from the inputs):

* sector leaf i = H(sector_seed, i mod 2^T) — see ``merkle.SectorTree`` for the periodic tile
  that keeps deep sectors cheap; snap data leaf i = H(data_seed, i mod 2^T);
* challenge j of partition p = H(randomness, p·C + j) mod 2^D;
* snap ``rho`` = H(randomness, r − 1) (an index no challenge counter reaches).

Public inputs, in order: the root (or comm_old, comm_new, rho for snap-update), then the C
challenge indices.
"""

from __future__ import annotations

import functools
import itertools
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.circuits import tree_cache
from engine.circuits.compiled import compiled
from engine.circuits.cs import ConstraintSystem, Slot
from engine.circuits.gadgets import alloc_bits, enforce_packing
from engine.circuits.grain import BLS12_381_R as R
from engine.circuits.limits import BUILTIN_KINDS, MAX_WINDOW_POST_PARTITIONS
from engine.circuits.merkle import TILE_DEPTH, SectorTree, merkle_root_gadget
from engine.circuits.poseidon import Hash2Many, hash2_many
from engine.circuits.sizing import MemoryNeeds, counts, shape_memory
from engine.prover.r1cs import R1CS

CURVE = "bls12381"
SCALES = ("tiny", "small", "medium", "large")
KINDS = BUILTIN_KINDS

# (depth D, challenges C) per kind and scale. Sized so that constraints + publics + 1 fit
# the power of two named in the comment (one Merkle level costs 281 constraints, 561 for
# snap-update's two trees); kept in step with tests/circuits/test_kinds.py.
SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "winning-post": {"tiny": (3, 1), "small": (7, 2), "medium": (16, 14), "large": (32, 116)},  # 2^10, 2^12, 2^16, 2^20
    "window-post": {"tiny": (3, 1), "small": (7, 2), "medium": (16, 14), "large": (32, 116)},  # same as winning
    "porep-c2": {"tiny": (3, 1), "small": (10, 2), "medium": (20, 11), "large": (30, 124)},  # 2^10, 2^13, 2^16, 2^20
    "snap-update": {"tiny": (2, 1), "small": (7, 1), "medium": (16, 7), "large": (30, 62)},  # 2^11, 2^12, 2^16, 2^20
}
FIXED_PARTITIONS = {"winning-post": 1, "porep-c2": 10, "snap-update": 16}
# Each kind's inputs, name → required. ``partitions`` is window-post's to choose; every other
# kind also accepts it, at its fixed count only.
INPUTS: dict[str, dict[str, bool]] = {
    "winning-post": {"sector_seed": True, "randomness": True},
    "window-post": {"sector_seed": True, "randomness": True, "partitions": False},
    "porep-c2": {"sector_seed": True, "randomness": True},
    "snap-update": {"sector_seed": True, "randomness": True, "data_seed": True},
}

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
SNAP_RHO_INDEX = R - 1

class InputError(ValueError):
    """A client's inputs are malformed; ``field`` names the offending one (for a 4xx reply)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _hex_field(inputs: dict, name: str) -> str:
    if name not in inputs:
        raise InputError(name, "is required")
    value = inputs[name]
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise InputError(name, "must be 64 hexadecimal digits")
    return value.lower()


def validate_inputs(kind: str, inputs: Any) -> tuple[dict, int]:
    """Normalised inputs and the number of partitions of a job of ``kind``."""
    if kind not in SIZES:
        raise InputError("kind", f"unknown proof kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not isinstance(inputs, dict):
        raise InputError("inputs", "must be a JSON object")
    allowed = {*INPUTS[kind], "partitions"}
    for name in inputs:
        if name not in allowed:
            raise InputError(str(name), f"is not an input of {kind}")
    out: dict[str, Any] = {"sector_seed": _hex_field(inputs, "sector_seed"), "randomness": _hex_field(inputs, "randomness")}
    if kind == "snap-update":
        out["data_seed"] = _hex_field(inputs, "data_seed")
    fixed = FIXED_PARTITIONS.get(kind)
    partitions = inputs.get("partitions", fixed if fixed is not None else 1)
    # bool is an int in Python; a client sending true must not get one partition.
    if not isinstance(partitions, int) or isinstance(partitions, bool):
        raise InputError("partitions", "must be an integer")
    if fixed is not None and partitions != fixed:
        raise InputError("partitions", f"{kind} always has {fixed} partition(s)")
    if not 1 <= partitions <= MAX_WINDOW_POST_PARTITIONS:
        raise InputError("partitions", f"must be between 1 and {MAX_WINDOW_POST_PARTITIONS}")
    if kind == "window-post":
        out["partitions"] = partitions
    return out, partitions


def demo_inputs(kind: str, window_partitions: int = 2) -> dict[str, object]:
    raw: dict[str, object] = {"sector_seed": secrets.token_hex(32), "randomness": secrets.token_hex(32)}
    if kind == "snap-update":
        raw["data_seed"] = secrets.token_hex(32)
    if kind == "window-post":
        raw["partitions"] = window_partitions
    return raw


def _fe(hex_value: str) -> int:
    return int(hex_value, 16) % R


def _seeded(seed: int, indices: range, hashes: Hash2Many) -> list[int]:
    """H(seed, i) for each index: a sector's leaves, its data leaves, challenges."""
    return hashes([seed] * len(indices), list(indices))


def _tree(key: str, build: Callable[[], SectorTree], hashes: Hash2Many) -> SectorTree:
    """A tree built natively is shared with the host's other processes (engine.circuits.tree_cache);
    the Python oracle's are built where they are asked for."""
    if hashes is not hash2_many:
        return build()
    return tree_cache.cached(key, build, SectorTree.to_bytes, SectorTree.from_bytes)


@functools.lru_cache(maxsize=16)
def _sector(seed_hex: str, depth: int, hashes: Hash2Many = hash2_many) -> SectorTree:
    return _tree(f"sector {seed_hex.lower()} {depth}",
                 lambda: SectorTree(depth, _seeded(_fe(seed_hex), range(1 << min(depth, TILE_DEPTH)), hashes),
                                    hashes=hashes), hashes)


@functools.lru_cache(maxsize=16)
def _snap_trees(sector_hex: str, data_hex: str, randomness_hex: str, depth: int,
                hashes: Hash2Many = hash2_many) -> tuple[SectorTree, SectorTree, int]:
    old = _sector(sector_hex, depth, hashes)
    (rho,) = hashes([_fe(randomness_hex)], [SNAP_RHO_INDEX])

    def new_tree() -> SectorTree:
        data = _seeded(_fe(data_hex), range(1 << old.tile), hashes)
        return SectorTree(depth, [(leaf + rho * d) % R for leaf, d in zip(old.levels[0], data, strict=True)],
                          hashes=hashes)

    key = f"snap-update {sector_hex.lower()} {data_hex.lower()} {randomness_hex.lower()} {depth}"
    return old, _tree(key, new_tree, hashes), rho


@dataclass
class PartitionData:
    """Everything the witness of one partition needs, computed natively from the inputs.

    ``challenges`` are the public indices; ``positions`` are the ones whose paths are opened
    (equal for an honest prover; tests change one to show the circuit catches it).
    """

    roots: list[int]
    challenges: list[int]
    positions: list[int]
    leaves: list[int]
    siblings: list[list[int]]
    rho: int | None = None
    data_leaves: list[int] = field(default_factory=list)
    new_siblings: list[list[int]] = field(default_factory=list)

    def public_inputs(self) -> list[int]:
        return [*self.roots, *([self.rho] if self.rho is not None else []), *self.challenges]

    def map_values(self, fn: Callable[[int], int]) -> PartitionData:
        """The same data with ``fn`` applied to every value, one at a time in ``flat`` order."""

        def each(values: list[int]) -> list[int]:
            return [fn(v) for v in values]

        return PartitionData(
            roots=each(self.roots),
            challenges=each(self.challenges),
            positions=each(self.positions),
            leaves=each(self.leaves),
            siblings=[each(s) for s in self.siblings],
            rho=None if self.rho is None else fn(self.rho),
            data_leaves=each(self.data_leaves),
            new_siblings=[each(s) for s in self.new_siblings],
        )

    def flat(self) -> list[int]:
        """Every value, in the order a witness program's slots number them."""
        values: list[int] = []

        def keep(value: int) -> int:
            values.append(value)
            return value

        self.map_values(keep)
        return values

    def slots(self) -> PartitionData:
        """This data's shape with a ``Slot`` for each value: what the circuit is recorded on."""
        numbers = itertools.count()
        return self.map_values(lambda _: Slot(next(numbers)))


@dataclass(frozen=True)
class CircuitShape:
    kind: str
    scale: str
    depth: int
    challenges: int
    curve: str = CURVE

    @property
    def circuit_id(self) -> str:
        return f"{self.kind}/{self.scale}"

    @property
    def two_trees(self) -> bool:
        return self.kind == "snap-update"

    # -- the circuit ------------------------------------------------------------------

    def define[Term](self, cs: ConstraintSystem[Term], data: PartitionData) -> None:
        roots = [cs.alloc_public(r) for r in data.roots]
        rho: Term | None = None  # snap-update's public rho; set exactly when two_trees
        if self.two_trees:
            if data.rho is None:
                raise ValueError(f"{self.circuit_id}: partition data without rho")
            rho = cs.alloc_public(data.rho)
        publics = [cs.alloc_public(c) for c in data.challenges]
        for j in range(self.challenges):
            bits = alloc_bits(cs, data.positions[j], self.depth)
            enforce_packing(cs, bits, publics[j])
            leaf = cs.alloc(data.leaves[j])
            if rho is not None:
                new_leaf = cs.add(leaf, cs.mul(rho, cs.alloc(data.data_leaves[j])))
                cs.enforce_equal(merkle_root_gadget(cs, leaf, bits, data.siblings[j]), roots[0])
                cs.enforce_equal(merkle_root_gadget(cs, new_leaf, bits, data.new_siblings[j]), roots[1])
            else:
                cs.enforce_equal(merkle_root_gadget(cs, leaf, bits, data.siblings[j]), roots[0])

    def placeholder_data(self) -> PartitionData:
        """All-zero data of the right sizes: what shape mode and counting run the circuit on."""
        c, d = self.challenges, self.depth
        return PartitionData(
            roots=[0, 0] if self.two_trees else [0],
            challenges=[0] * c,
            positions=[0] * c,
            leaves=[0] * c,
            siblings=[[0] * d for _ in range(c)],
            rho=0 if self.two_trees else None,
            data_leaves=[0] * c if self.two_trees else [],
            new_siblings=[[0] * d for _ in range(c)] if self.two_trees else [],
        )

    def partition_data(self, inputs: dict, index: int, *, hashes: Hash2Many = hash2_many) -> PartitionData:
        """The honest witness data of partition ``index`` (inputs already normalised), hashed
        natively (or by ``hashes``: the Python oracle gives the same values)."""
        base = index * self.challenges
        mask = (1 << self.depth) - 1
        challenges = [h & mask for h in _seeded(_fe(inputs["randomness"]), range(base, base + self.challenges), hashes)]
        if self.two_trees:
            old, new, rho = _snap_trees(inputs["sector_seed"], inputs["data_seed"], inputs["randomness"], self.depth,
                                        hashes)
            tile = (1 << old.tile) - 1
            return PartitionData(
                roots=[old.root, new.root],
                challenges=challenges,
                positions=list(challenges),
                leaves=[old.leaf(c) for c in challenges],
                siblings=[old.siblings(c) for c in challenges],
                rho=rho,
                data_leaves=hashes([_fe(inputs["data_seed"])] * len(challenges), [c & tile for c in challenges]),
                new_siblings=[new.siblings(c) for c in challenges],
            )
        tree = _sector(inputs["sector_seed"], self.depth, hashes)
        return PartitionData(
            roots=[tree.root],
            challenges=challenges,
            positions=list(challenges),
            leaves=[tree.leaf(c) for c in challenges],
            siblings=[tree.siblings(c) for c in challenges],
        )

    def public_inputs(self, inputs: dict, index: int) -> list[int]:
        normalised, _ = validate_inputs(self.kind, inputs)
        return self.partition_data(normalised, index).public_inputs()

    # -- sizes ------------------------------------------------------------------------

    def r1cs(self) -> R1CS:
        """The compiled constraint matrices, built once per process."""
        return compiled(self)

    @property
    def n_constraints(self) -> int:
        return counts(self)[0]

    @property
    def n_vars(self) -> int:
        return counts(self)[1]

    @property
    def n_public(self) -> int:
        return (3 if self.two_trees else 1) + self.challenges

    @property
    def domain_size(self) -> int:
        needed = self.n_constraints + self.n_public + 1
        return 1 << (needed - 1).bit_length()

    @property
    def memory(self) -> MemoryNeeds:
        return shape_memory(self)

    @property
    def compiled_bytes(self) -> int:
        """What a synthesis process keeps of this shape: its compiled A, B and C."""
        from engine.circuits.sizing import compiled_bytes

        return compiled_bytes(self)

@functools.cache
def circuit_for(kind: str, scale: str) -> CircuitShape:
    if kind not in SIZES:
        raise InputError("kind", f"unknown proof kind {kind!r}; expected one of {', '.join(KINDS)}")
    if scale not in SCALES:
        raise InputError("scale", f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    depth, challenges = SIZES[kind][scale]
    return CircuitShape(kind=kind, scale=scale, depth=depth, challenges=challenges)


def parse_circuit_id(circuit_id: str) -> CircuitShape:
    kind, sep, scale = circuit_id.partition("/")
    if not sep:
        raise InputError("circuit_id", f"expected <kind>/<scale>, got {circuit_id!r}")
    return circuit_for(kind, scale)
