"""What a circuit costs: constraint and variable counts, and the memory one partition needs.

Counts come from running the circuit in witness mode on placeholder data (``CountingCS``),
which is far cheaper than compiling its matrices; the memory a partition reserves follows
from them (built-in kinds) or from the sizes a zkey declares (circom circuits).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    work_bytes: int = 0  # the prover's working arrays while the partition is proved

    @property
    def partition_bytes(self) -> int:
        return self.witness_bytes + self.abc_bytes + self.work_bytes

    @property
    def released_bytes(self) -> int:
        """The share a partition frees once its a/b/c are on the device (on the CPU: once
        gpu_prove_start has run the H polynomial and four of the MSMs): a/b/c and the working
        arrays of that phase; the rest is held until the proof is finished (the G2 MSM)."""
        return self.abc_bytes + self.work_bytes * PROVER_START_ARRAYS // PROVER_WORK_ARRAYS


# The prover's working arrays, in domain-sized Fr arrays (32 bytes a row), beyond the
# assignment the partition already holds (witness, a/b/c). The CPU prover's H phase holds the
# a/b/c spread over the domain (3, statement.domain_evals), native.h_coset's copies of them and
# its output (4) and the coset powers and twiddles (1.5); the assignment arrives from the
# synthesis process pickled, so a second copy of it (4) is held while it is unpickled: 12 of
# them are done with when gpu_prove_start returns. The MSMs' signed digits, scalar
# conversions and buckets take about 6 more, the G2 one in gpu_prove_finish. bench/scale.py
# measured one porep-c2/large partition's peak in the engine at 20.5 of them (0.64 GiB, 2^20
# domain): 18 here, with witness (1) and a/b/c (3), is 22.
PROVER_WORK_ARRAYS = 18
PROVER_START_ARRAYS = 12


def work_bytes(domain: int) -> int:
    return PROVER_WORK_ARRAYS * domain * FR_BYTES


def shape_memory(shape: CircuitShape) -> MemoryNeeds:
    n_vars, n_public, domain = shape.n_vars, shape.n_public, shape.domain_size
    # The zkey's point arrays: A, B1 (G1, every signal), B2 (G2, every signal),
    # C (G1, private signals), H (G1, domain), IC (G1, publics and the one), and the
    # verifying key's alpha, beta, delta (G1) and beta, gamma, delta (G2).
    points = (
        3 * G1_BYTES + 3 * G2_BYTES
        + n_vars * G1_BYTES * 2
        + n_vars * G2_BYTES
        + (n_vars - n_public - 1) * G1_BYTES
        + domain * G1_BYTES
        + (n_public + 1) * G1_BYTES
    )
    # ... and its A and B matrices (CSR over the domain's rows, 8-byte row pointers and
    # columns, 32-byte coefficients), which the prover keeps with the points: about a
    # third of a porep-c2 key, and without them a cached key outgrew its reservation.
    a_entries, b_entries = key_matrix_entries(shape)
    matrices = (a_entries + b_entries) * (8 + FR_BYTES) + 2 * (domain + 1) * 8
    key = points + matrices
    return MemoryNeeds(witness_bytes=n_vars * FR_BYTES, abc_bytes=3 * domain * FR_BYTES, key_bytes=key,
                       table_bytes=_table_bytes(n_vars, n_public, domain, G1_BYTES, G2_BYTES),
                       work_bytes=work_bytes(domain))


def _table_bytes(n_vars: int, n_public: int, domain: int, g1: int, g2: int) -> int:
    """The bound on the fixed-base tables of the key's five MSM sections (A, B1, B2, C, H)."""
    from engine.prover.backends.cpu.fixed_base import table_nbytes_bound

    sections = ((n_vars, g1), (n_vars, g1), (n_vars, g2), (n_vars - n_public - 1, g1), (domain, g1))
    return sum(table_nbytes_bound(rows, size) for rows, size in sections)


# (depth, challenges) of the three small shapes a kind's matrix entries are solved from.
_PROBES = ((1, 1), (2, 1), (1, 2))
_ENTRIES: dict[tuple[str, int, int], tuple[int, int]] = {}


def key_matrix_entries(shape: CircuitShape) -> tuple[int, int]:
    """Non-zero entries of the proving key's A and B matrices, without compiling the shape.

    Every challenge proves one Merkle path, so a matrix's entries are exactly
    ``x·C·D + y·C + z`` in the shape's challenges C and depth D (per level: a hash and the
    bit's selection; per challenge: its bits' packing and the root check; once: the roots).
    x, y and z are solved from three shapes of one or two levels and challenges, compiled in
    a few milliseconds; tests/circuits/test_kinds.py holds the result to the compiled
    matrices. The key's A also has one row per public input and the one (snarkjs's layout).
    """
    key = (shape.kind, shape.depth, shape.challenges)
    if key not in _ENTRIES:


        a, b, _ = compiled_entries(shape)
        _ENTRIES[key] = (a + shape.n_public + 1, b)
    return _ENTRIES[key]


_COMPILED_ENTRIES: dict[tuple[str, int, int], tuple[int, int, int]] = {}


def compiled_entries(shape: CircuitShape) -> tuple[int, int, int]:
    """Non-zero entries of the shape's compiled A, B and C matrices (engine.circuits.compiled),
    solved as ``x·C·D + y·C + z`` from three tiny shapes (see key_matrix_entries)."""
    key = (shape.kind, shape.depth, shape.challenges)
    if key not in _COMPILED_ENTRIES:
        import dataclasses

        from engine.circuits.cs import ShapeCS

        probes = []
        for depth, challenges in _PROBES:
            probe = dataclasses.replace(shape, depth=depth, challenges=challenges)
            cs = ShapeCS()
            probe.define(cs, probe.placeholder_data())
            probes.append(tuple(sum(map(len, rows)) for rows in (cs.rows_a, cs.rows_b, cs.rows_c)))
        entries = []
        for e11, e21, e12 in zip(*probes, strict=True):
            x = e21 - e11  # one more level of one challenge
            y = e12 - e11 - x  # one more challenge of one level, less its level
            z = e11 - x - y
            entries.append(x * shape.challenges * shape.depth + y * shape.challenges + z)
        _COMPILED_ENTRIES[key] = (entries[0], entries[1], entries[2])
    return _COMPILED_ENTRIES[key]


# The distinct coefficients a witness program's table holds, at most (our kinds have 169): the
# table is counted at this size, as it is not known without compiling.
COEFFICIENT_TABLE_ROWS = 1 << 10


def compiled_bytes(shape: CircuitShape) -> int:
    """What a synthesis process holds once it has the shape's compiled matrices and witness
    program (kept for its next partitions): three CSR matrices over the constraints, an 8-byte
    column and a 32-byte coefficient per entry and an 8-byte row pointer per row; the program's
    flag and B source per row (1 + 8 bytes), four int64s per input, a 4-byte coefficient index
    per entry and its table of distinct coefficients (counted at COEFFICIENT_TABLE_ROWS)."""
    rows, _, inputs = _counts(shape)
    entries = sum(compiled_entries(shape))
    matrices = entries * (8 + FR_BYTES) + 3 * (rows + 1) * 8
    return matrices + rows * (1 + 8) + inputs * 4 * 8 + entries * 4 + COEFFICIENT_TABLE_ROWS * FR_BYTES


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
                       table_bytes=_table_bytes(n_vars, n_public, domain_size, g1, g2),
                       work_bytes=work_bytes(domain_size))


class CountingCS(WitnessCS):
    """Witness mode on placeholder data, counting constraints and inputs (the allocations a
    witness program reads from the partition's data): sizes without matrices."""

    def __init__(self) -> None:
        super().__init__()
        self.constraints = 0
        self.inputs = 0

    def alloc_public(self, value: int) -> int:
        self.inputs += 1
        return super().alloc_public(value)

    def alloc(self, value: int) -> int:
        self.inputs += 1
        return super().alloc(value)

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


_COUNTS: dict[CircuitShape, tuple[int, int, int]] = {}


def counts(shape: CircuitShape) -> tuple[int, int]:
    """(constraints, variables)."""
    constraints, n_vars, _ = _counts(shape)
    return constraints, n_vars


def _counts(shape: CircuitShape) -> tuple[int, int, int]:
    """(constraints, variables, inputs of its witness program)."""
    if shape not in _COUNTS:
        done = already_compiled(shape)
        if done is not None:
            _COUNTS[shape] = (done.r1cs.n_constraints, done.r1cs.n_vars, done.program.ops.shape[0])
        else:
            cs = CountingCS()
            shape.define(cs, shape.placeholder_data())
            # The Poseidon witness fast path appends its values without calling mul(), so
            # its constraints are added here: a fixed number per hash.
            _COUNTS[shape] = (cs.constraints + _hash_constraints(shape), cs.n_vars, cs.inputs)
    return _COUNTS[shape]


def _hash_constraints(shape: CircuitShape) -> int:
    trees = 2 if shape.two_trees else 1
    return HASH_CONSTRAINTS * shape.depth * shape.challenges * trees




# ---- device memory (a CUDA device's share of a proof) --------------------------------------


@dataclass(frozen=True)
class DeviceLaunchBytes:
    """A launch's device memory: ``kept`` from gpu_prove_start until finished, and ``scratch``
    held only while one of its MSMs runs (the largest of them: they run one after the other on
    the device's stream, and CuPy's pool hands the memory from one to the next)."""

    kept: int
    scratch: int

    @property
    def total(self) -> int:
        return self.kept + self.scratch


def device_launch_needs(domain: int, witness_rows: int, msm_bases: Sequence[tuple[int, int]],
                        k: int = 1) -> DeviceLaunchBytes:
    """The device memory one launch of ``k`` proofs holds, beyond the key's resident bases:
    counted from what engine.prover.backends.cuda allocates, so it follows that code's formulas.

    ``msm_bases`` gives each MSM the launch runs as (bases' rows, a base's width in 64-bit
    words). Per proof, H on the coset keeps a, b, c uploaded, the coset powers, two constants
    and its output (5 domain arrays); the witness is uploaded once; the domain's twiddles
    (forward and inverse) are cached on the device. Each MSM keeps, until finished, its sort
    keys, bucket offsets, the last level of its bucket sums, its reduction segments and their
    sums, and the scalars it reads (a copy where they are not contiguous on the device); while
    it runs, the sort's scratch (as large as its keys), searchsorted's query and result before
    its copy, and the earlier levels of its sums."""
    fr = FR_BYTES
    h = k * (5 * domain * fr + 2 * fr) + 2 * max(1, domain // 2) * fr
    witness = k * witness_rows * fr
    msms = [_msm_launch_bytes(rows, width, k) for rows, width in msm_bases if rows]
    return DeviceLaunchBytes(kept=h + witness + sum(kept for kept, _ in msms),
                             scratch=max((passing for _, passing in msms), default=0))


def device_launch_bytes(domain: int, witness_rows: int, msm_bases: Sequence[tuple[int, int]], k: int = 1) -> int:
    """What a launch reserves on its device until finished (device_launch_needs' total)."""
    return device_launch_needs(domain, witness_rows, msm_bases, k).total


def _msm_launch_bytes(rows: int, width: int, k: int) -> tuple[int, int]:
    """(bytes an MSM of k vectors over ``rows`` bases keeps until finished, bytes it holds
    only while it runs): cuda.Grid._msm_batch_async's groups of at most batch_limit vectors,
    each one _msm_launch."""
    from engine.prover.backends.cuda import BUCKET_IDS, CHUNK, SEGMENTS, msm_window_gpu

    cw = msm_window_gpu(rows)
    nwin, half = (256 + cw) // cw, 1 << (cw - 1)
    step = max(1, BUCKET_IDS // (nwin << (cw - 1)))
    xz = 2 * width  # a bucket sum's XYZZ coordinates, in words
    kept, passing = 0, 0
    for lo in range(0, k, step):
        g = min(step, k - lo)
        kw = g * nwin
        nb = kw * half
        keys = kw * rows * 8
        starts = (nb + 1) * 8
        buckets, bucket_levels = _segmented_sum_bytes(nb, rows, kw * rows, xz, CHUNK)
        s = max(1, min(half, SEGMENTS // kw))
        seg = kw * s * xz * 8
        sums, sum_levels = _segmented_sum_bytes(kw, s, kw * s, xz, CHUNK)
        scalars = g * rows * FR_BYTES
        kept += keys + starts + buckets + seg + sums + (kw + 1) * 8 + scalars
        # the sort's scratch, searchsorted's query and result before its copy, earlier levels
        passing = max(passing, keys + 2 * starts + bucket_levels + sum_levels)
    return kept, passing


def _segmented_sum_bytes(nseg: int, most: int, bound: int, xz: int, chunk: int) -> tuple[int, int]:
    """cuda.Grid._segmented_sum's (last level's sums and offsets, every earlier level's), in bytes."""
    levels, level = [], 0
    while level == 0 or most > 1:
        bound = (bound + chunk - 1) // chunk + nseg
        levels.append((nseg + 1) * 8 + bound * xz * 8)
        most = (most + chunk - 1) // chunk
        level += 1
    return levels[-1], sum(levels[:-1])
