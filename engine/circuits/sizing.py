"""What a circuit costs: constraint and variable counts, and the memory one partition needs.

Counts come from running the circuit in witness mode on placeholder data (``CountingCS``),
which is far cheaper than compiling its matrices; the memory a partition reserves follows
from them (built-in kinds) or from the sizes a zkey declares (circom circuits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.circuits.compiled import already_compiled
from engine.circuits.cs import WitnessCS
from engine.circuits.poseidon import HASH_CONSTRAINTS

if TYPE_CHECKING:
    from engine.circuits.kinds import CircuitShape

# Sizes of the zkey's affine points on BLS12-381: G1 = 2 × 48 bytes, G2 = 4 × 48 bytes.
G1_BYTES = 96
G2_BYTES = 192
FR_BYTES = 32


@dataclass(frozen=True)
class MemoryNeeds:
    """Bytes one partition needs on the host, from the circuit's real sizes."""

    witness_bytes: int
    abc_bytes: int
    key_bytes: int
    table_bytes: int = 0  # the most the key's fixed-base tables take, where the engine keeps it

    @property
    def partition_bytes(self) -> int:
        return self.witness_bytes + self.abc_bytes


def shape_memory(shape: CircuitShape) -> MemoryNeeds:
    n_vars, n_public, domain = shape.n_vars, shape.n_public, shape.domain_size
        # The zkey's point arrays: A, B1 (G1, every signal), B2 (G2, every signal),
    # C (G1, private signals), H (G1, domain), IC (G1, publics and the one).
    key = (
        n_vars * G1_BYTES * 2
        + n_vars * G2_BYTES
        + (n_vars - n_public - 1) * G1_BYTES
        + domain * G1_BYTES
        + (n_public + 1) * G1_BYTES
    )
    return MemoryNeeds(witness_bytes=n_vars * FR_BYTES, abc_bytes=3 * domain * FR_BYTES, key_bytes=key,
                       table_bytes=_table_bytes(n_vars, n_public, domain, G1_BYTES, G2_BYTES))


def _table_bytes(n_vars: int, n_public: int, domain: int, g1: int, g2: int) -> int:
    """The bound on the fixed-base tables of the key's five MSM sections (A, B1, B2, C, H)."""
    from engine.prover.backends.cpu.fixed_base import table_nbytes_bound

    sections = ((n_vars, g1), (n_vars, g1), (n_vars, g2), (n_vars - n_public - 1, g1), (domain, g1))
    return sum(table_nbytes_bound(rows, size) for rows, size in sections)


# A circom witness generator's own memory (its signals and components, in wasm linear memory)
# when the engine runs it from a request's inputs: reserved with the partition, and the limit
# the generator runs under. The circuits seen so far take well under this.
GENERATOR_BASE = 64 << 20
GENERATOR_PER_SIGNAL = 256


def generator_bytes(n_vars: int) -> int:
    return GENERATOR_BASE + GENERATOR_PER_SIGNAL * max(0, n_vars)


def custom_memory(n_vars: int, n_public: int, domain_size: int, n_coefficients: int, n8q: int,
                  zkey_bytes: int) -> MemoryNeeds:
    """A custom (snarkjs) circuit's needs, from the sizes its zkey declares, not the upload's
    size alone: the upload is validated, so these sizes are the file's own.

    An uploaded key is not cached: the engine reads it once per job and the synthesis process
    reads it again, each holding the file's bytes while the point arrays are copied out
    (affine points, G1 = 2·n8q bytes, G2 = 4·n8q) and the A/B matrices are built (a 40-byte
    entry per coefficient, two domain-sized row-pointer and count arrays each)."""
    g1, g2 = 2 * n8q, 4 * n8q
    points = (2 * n_vars + (n_vars - n_public - 1) + domain_size + n_public + 1) * g1 + n_vars * g2
    matrices = n_coefficients * (8 + FR_BYTES) + 2 * 2 * (domain_size + 1) * 8
    key = 2 * (points + matrices + zkey_bytes)
    return MemoryNeeds(witness_bytes=2 * n_vars * FR_BYTES, abc_bytes=3 * domain_size * FR_BYTES, key_bytes=key,
                       table_bytes=_table_bytes(n_vars, n_public, domain_size, g1, g2))


class CountingCS(WitnessCS):
    """Witness mode on placeholder data, counting constraints: sizes without matrices."""

    def __init__(self) -> None:
        super().__init__()
        self.constraints = 0

    def enforce(self, a: Any, b: Any, c: Any) -> None:
        self.constraints += 1

    def enforce_equal(self, a: Any, b: Any) -> None:
        self.constraints += 1

    def mul(self, a: Any, b: Any) -> int:
        self.constraints += 1
        return super().mul(a, b)

    def materialize(self, a: Any) -> int:
        self.constraints += 1
        return super().materialize(a)


_COUNTS: dict[CircuitShape, tuple[int, int]] = {}


def counts(shape: CircuitShape) -> tuple[int, int]:
    if shape not in _COUNTS:
        r1cs = already_compiled(shape)
        if r1cs is not None:
            _COUNTS[shape] = (r1cs.n_constraints, r1cs.n_vars)
        else:
            cs = CountingCS()
            shape.define(cs, shape.placeholder_data())
            # The Poseidon witness fast path appends its values without calling mul(), so
            # its constraints are added here: a fixed number per hash.
            _COUNTS[shape] = (cs.constraints + _hash_constraints(shape), cs.n_vars)
    return _COUNTS[shape]


def _hash_constraints(shape: CircuitShape) -> int:
    trees = 2 if shape.two_trees else 1
    return HASH_CONSTRAINTS * shape.depth * shape.challenges * trees


