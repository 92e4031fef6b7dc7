"""A circuit's witness program: how each of its variables gets its value, run natively.

``ShapeCS`` records it with the matrices (engine.circuits.cs), from the circuit run on
``Slot``s: every variable is either an input (a value of the partition's data, or one of its
bits) or solved from its own constraint row, v = (A·w)(B·w) (``mul``, ``materialize``; every
Poseidon round is such rows). So the program is small beside the matrices it runs over: a flag
per row and one operation per input, and the matrices' coefficients as an index per entry into
the few distinct values they take (a few hundred: the MDS products, the round constants, the
packing's powers of two), which the kernel makes Montgomery once a run so that a term costs one
product and the pass reads 12 bytes an entry, not 40. engine.circuits.compiled compiles it with
the matrices and caches it beside them; the kernel (kernels/witness_cpu.h) runs it for a
partition's data in one pass over the rows that yields the witness and A·w, B·w, C·w together.

Two checks guard it. ``check_program`` (at compile time) proves the recording sound: every
variable is defined exactly once, before any row reads it, and a solving row's C row is its
variable alone. ``check_bounds`` (each time a process loads a cached program) keeps every index
the kernel follows inside its arrays, so a damaged cache file cannot make it read astray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from engine.circuits.cs import ShapeCS, ints_to_limbs, limbs_to_ints
from engine.prover.params.curves import get_curve
from engine.prover.r1cs import R1CS, SparseMatrix

OP_COLUMNS = ("before_row", "variable", "slot", "bit")  # one int64 each; bit -1: the whole value


@dataclass(frozen=True)
class WitnessProgram:
    slots: int  # how many values of the partition's data it reads
    ops: np.ndarray  # (n, 4) int64, OP_COLUMNS, ordered by row
    solves: np.ndarray  # (rows,) uint8: 1 where the row defines its C row's variable
    b_src: np.ndarray  # (rows,) int64: the row (<= this one) whose A equals this row's B, or -1
    coefficients: np.ndarray  # (k, 4) uint64: the matrices' distinct coefficients, 1 first
    a_coef: np.ndarray  # (A's entries,) uint32: each entry's coefficient in ``coefficients``
    b_coef: np.ndarray
    c_coef: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(sum(getattr(self, name).nbytes for name in ARRAYS))


ARRAYS = ("ops", "solves", "b_src", "coefficients", "a_coef", "b_coef", "c_coef")
ONE = np.array([1, 0, 0, 0], dtype=np.uint64)


class ProgramError(ValueError):
    """A recorded program that cannot compute the witness (a circuit bug, or a damaged cache)."""


class Recording(NamedTuple):
    """What ``ShapeCS`` recorded of the program, in the compiled matrices' variable numbering:
    all of it but the coefficients' index, which ``indexed`` takes from the matrices (so the
    recording's Python rows can be given back first: they are most of a compile's peak)."""

    slots: int
    ops: np.ndarray
    solves: np.ndarray
    b_src: np.ndarray


def record(cs: ShapeCS, slots: int) -> Recording:
    """The program ``cs`` recorded."""
    unslotted = [var for _, var, slot, _ in cs.inputs if slot is None]
    if unslotted:
        raise ProgramError(f"{len(unslotted)} allocations take a value that is not one of the partition's data")
    ops = np.array([(row, var if var >= 0 else cs.n_public - var, slot, bit) for row, var, slot, bit in cs.inputs],
                   dtype=np.int64).reshape(-1, 4)
    return Recording(slots=slots, ops=ops, solves=np.array(cs.solves, dtype=np.uint8), b_src=_b_sources(cs))


def indexed(recording: Recording, r1cs: R1CS) -> WitnessProgram:
    """The whole program: the recording and its matrices' coefficients indexed."""
    table, (a, b, c) = _coefficient_index(r1cs)
    return WitnessProgram(slots=recording.slots, ops=recording.ops, solves=recording.solves, b_src=recording.b_src,
                          coefficients=table, a_coef=a, b_coef=b, c_coef=c)


def _coefficient_index(r1cs: R1CS) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct coefficients of A, B and C (1 first) and each entry's index among them."""
    mats = (r1cs.a, r1cs.b, r1cs.c)
    every = np.concatenate([ONE[None, :], *(m.coeffs for m in mats)])
    table, index = np.unique(every, axis=0, return_inverse=True)
    first = int(index[0])  # where 1 sorted to: swapped to the front
    order = np.arange(table.shape[0])
    order[[0, first]] = order[[first, 0]]
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    index = rank[index.reshape(-1)].astype(np.uint32)
    ends = np.cumsum([1, *(m.cols.shape[0] for m in mats)])
    return np.ascontiguousarray(table[order]), [index[lo:hi] for lo, hi in zip(ends[:-1], ends[1:], strict=True)]


B_SOURCE_WINDOW = 4  # rows back a B row's equal A is looked for: an S-box's three rows are adjacent


def _b_sources(cs: ShapeCS) -> np.ndarray:
    """Per row, the latest row up to it (and at most B_SOURCE_WINDOW back) whose A is this row's
    B, or -1: an S-box's input x is the A and B of x·x and the B of x⁴·x, summed once."""
    src = np.full(len(cs.rows_b), -1, dtype=np.int64)
    rows_a = cs.rows_a
    for r, lc_b in enumerate(cs.rows_b):
        if len(lc_b) == 1 and next(iter(lc_b.values())) == 1:
            continue  # a lone variable is read as cheaply as a copy
        for s in range(r, max(r - B_SOURCE_WINDOW, -1), -1):
            if rows_a[s] == lc_b:
                src[r] = s
                break
    return src


def check_program(r1cs: R1CS, program: WitnessProgram) -> None:
    """Raise ProgramError unless the program defines every variable once, before it is read.

    In time steps: the inputs recorded before row r are defined at 2r, the variable of a
    solving row r at 2r + 1; row r reads A and B after its inputs and before its own variable
    (a variable defined by 2r), and C by 2r + 1 when it solves (its C row is its variable
    alone), by 2r when it does not."""
    check_bounds(r1cs, program)
    for name, m, index in (("A", r1cs.a, program.a_coef), ("B", r1cs.b, program.b_coef), ("C", r1cs.c, program.c_coef)):
        if not np.array_equal(program.coefficients[index], m.coeffs):
            raise ProgramError(f"{name}: an entry's coefficient index names another coefficient")
    count = np.zeros(r1cs.n_vars, dtype=np.int64)
    times = np.full(r1cs.n_vars, -1, dtype=np.int64)  # the constant 1 is there from the start
    count[0] = 1
    np.add.at(count, program.ops[:, 1], 1)
    times[program.ops[:, 1]] = 2 * program.ops[:, 0]
    solving = np.flatnonzero(program.solves)
    c = r1cs.c
    if np.any(np.diff(c.row_ptr)[solving] != 1):
        raise ProgramError("a solving row's C row is not a single variable")
    if np.any(c.coeffs[c.row_ptr[solving]] != ONE):
        raise ProgramError("a solving row's C coefficient is not 1")
    own = c.cols[c.row_ptr[solving]]
    np.add.at(count, own, 1)
    times[own] = 2 * solving + 1
    if np.any(count != 1):
        var = int(np.flatnonzero(count != 1)[0])
        raise ProgramError(f"variable {var} is defined {int(count[var])} times")
    copied = np.flatnonzero(program.b_src >= 0)
    src = program.b_src[copied]
    a, b = r1cs.a, r1cs.b
    same = np.array_equal(np.diff(a.row_ptr)[src], np.diff(b.row_ptr)[copied])
    if not same or not (np.array_equal(a.cols[_entries(a, src)], b.cols[_entries(b, copied)])
                        and np.array_equal(a.coeffs[_entries(a, src)], b.coeffs[_entries(b, copied)])):
        raise ProgramError("a B row copied from an A row differs from it")
    for name, m in (("A", r1cs.a), ("B", r1cs.b), ("C", r1cs.c)):
        rows = np.repeat(np.arange(m.rows, dtype=np.int64), np.diff(m.row_ptr))
        latest = 2 * rows + (program.solves[rows] if name == "C" else 0)
        late = times[m.cols] > latest
        if late.any():
            k = int(np.flatnonzero(late)[0])
            raise ProgramError(f"row {int(rows[k])} of {name} reads variable {int(m.cols[k])} before it is defined")


def _entries(m: SparseMatrix, rows: np.ndarray) -> np.ndarray:
    """The entry indices of ``rows``, row after row."""
    lengths = np.diff(m.row_ptr)[rows]
    starts = np.repeat(m.row_ptr[rows] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return starts + np.arange(int(lengths.sum()), dtype=np.int64)


def check_bounds(r1cs: R1CS, program: WitnessProgram) -> None:
    """Raise ProgramError unless every index the kernel follows stays inside its array."""
    rows = r1cs.n_constraints
    table = program.coefficients
    if table.ndim != 2 or table.shape[1] != 4 or not table.shape[0] or not np.array_equal(table[0], ONE) \
            or max(limbs_to_ints(table)) >= get_curve(r1cs.curve).r:
        raise ProgramError("coefficients: expected field elements, 1 first")
    for name, m, index in (("A", r1cs.a, program.a_coef), ("B", r1cs.b, program.b_coef), ("C", r1cs.c, program.c_coef)):
        ptr = m.row_ptr
        if ptr.shape != (rows + 1,) or ptr[0] != 0 or ptr[-1] != m.cols.shape[0] or np.any(np.diff(ptr) < 0):
            raise ProgramError(f"{name}: not a CSR index of {rows} rows")
        if m.cols.size and (m.cols.min() < 0 or m.cols.max() >= r1cs.n_vars):
            raise ProgramError(f"{name}: columns outside the {r1cs.n_vars} variables")
        if index.shape != m.cols.shape or (index.size and int(index.max()) >= table.shape[0]):
            raise ProgramError(f"{name}: coefficient indices outside the {table.shape[0]} coefficients")
    ops, solves = program.ops, program.solves
    if solves.shape != (rows,) or np.any(solves > 1):
        raise ProgramError(f"solves: expected a 0/1 flag for each of {rows} rows")
    if program.b_src.shape != (rows,) or np.any(program.b_src < -1) or np.any(program.b_src > np.arange(rows)):
        raise ProgramError(f"b_src: expected a row up to its own, or -1, for each of {rows} rows")
    if solves.any() and np.any(np.diff(r1cs.c.row_ptr)[solves == 1] < 1):
        raise ProgramError("a solving row has an empty C row")
    if ops.ndim != 2 or ops.shape[1] != 4:
        raise ProgramError(f"ops: expected shape (n, 4), got {ops.shape}")
    before, var, slot, bit = ops.T
    if ops.shape[0] and (np.any(np.diff(before) < 0) or before[0] < 0 or before[-1] > rows
                         or var.min() < 1 or var.max() >= r1cs.n_vars or slot.min() < 0 or slot.max() >= program.slots
                         or bit.min() < -1 or bit.max() > 255):
        raise ProgramError("ops: an operation outside its rows, variables, slots or bits")


def slot_values(values: list[int]) -> np.ndarray:
    """The partition's data as the program reads it: each value's 256 raw bits (bits are taken
    of the value as it is, whole values reduced mod r by the kernel, as witness mode does)."""
    try:
        return ints_to_limbs(values)
    except OverflowError:
        raise ValueError("partition data holds a value outside 0..2^256 - 1") from None


def run(r1cs: R1CS, program: WitnessProgram, values: np.ndarray, witness: np.ndarray, a: np.ndarray, b: np.ndarray,
        c: np.ndarray, *, check: bool) -> int | None:
    """Fill ``witness`` and ``a``, ``b``, ``c`` (the caller's arrays) for the slot ``values``;
    with ``check``, the first row that fails a·b = c, else None."""
    from engine.prover.backends.cpu import native

    if values.shape != (program.slots, 4):
        raise ValueError(f"expected {program.slots} data values, got {values.shape[0]}")
    if witness.shape[0] != r1cs.n_vars:
        raise ValueError(f"witness: expected {r1cs.n_vars} rows, got {witness.shape[0]}")
    matrices = tuple((m.row_ptr, m.cols, index)
                     for m, index in ((r1cs.a, program.a_coef), (r1cs.b, program.b_coef), (r1cs.c, program.c_coef)))
    return native.run_witness_program(r1cs.curve, program.coefficients, matrices, program.ops, program.solves,
                                      program.b_src, values, witness, a, b, c, check=check)
