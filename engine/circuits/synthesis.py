"""Synthesis of one partition: its witness and A·w, B·w, C·w, natively.

``synthesize_partition(circuit_id, inputs, index, check=...)`` derives the partition's data
(challenges, leaves, Merkle paths: Poseidon in the kernels, the sector tree cached per
process), then runs the circuit's witness program (engine.circuits.program, compiled once per
shape with its matrices and cached beside them under CACHE_DIR) in one native pass over the
rows that yields the witness and the three products together, on one thread. It is
module-level and takes only picklable arguments, so the engine can run it in a process pool.

``synthesize_partition_into(circuit_id, inputs, index, witness, a, b, c, check=...)`` is the
same synthesis written into the caller's arrays, for a caller that hands the result to another
process without copying it: e.g. numpy views of one shared-memory block, ``witness`` of
``(n_vars, 4)`` and ``a``, ``b``, ``c`` of ``(n_constraints, 4)`` uint64 (C-contiguous,
writeable; ``partition_rows(circuit_id)`` gives both counts). It returns the ``Assignment``
over those very arrays; nothing else is allocated at their size.

``synthesize_in_python`` is the path the native one replaced, kept as its oracle: the circuit
run in witness mode (``WitnessCS``, Python ints) and the three CSR products; the tests hold the
native witness, products and proofs byte-identical with it.

Use a "spawn" (or "forkserver") pool context: the native kernels start OpenMP threads, and
forking a threaded parent can deadlock the child. Pass ``initializer=configure_worker`` so
each worker's native products use one thread instead of every core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.circuits import program
from engine.circuits.compiled import compiled_shape
from engine.circuits.cs import WitnessCS
from engine.circuits.kinds import CircuitShape, PartitionData, parse_circuit_id, validate_inputs
from engine.circuits.poseidon import hash2_many_python
from engine.prover.backends.cpu import native
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.r1cs import R1CS, Assignment, SparseMatrix, starts_with_one
from engine.prover.satisfied import check_satisfied as rows_satisfied

# Threads of the native sparse products in this process; None = every core. A pool of N
# synthesis processes should give each one thread (see ``configure_worker``).
_PRODUCT_THREADS: int | None = None


def configure_worker(threads: int | None = 1) -> None:
    """ProcessPoolExecutor initializer: cap this worker's native threads (no oversubscription)."""
    global _PRODUCT_THREADS
    _PRODUCT_THREADS = threads


def matvec(curve: str, m: SparseMatrix, witness: np.ndarray) -> np.ndarray:
    """Rows of M·w as (rows, 4) limbs."""
    return native.sparse_matvec(curve, m.row_ptr, m.cols, m.coeffs, witness, threads=_PRODUCT_THREADS)


def check_satisfied(r1cs: R1CS, assignment: Assignment) -> None:
    """Recompute A·w, B·w, C·w from the matrices and raise on the first failing constraint."""
    if assignment.witness.shape[0] != r1cs.n_vars:
        raise ValueError(f"witness has {assignment.witness.shape[0]} values, the circuit {r1cs.n_vars}")
    if not starts_with_one(assignment.witness):
        raise ValueError("witness[0] is not 1")
    a, b, c = (matvec(r1cs.curve, m, assignment.witness) for m in (r1cs.a, r1cs.b, r1cs.c))
    rows_satisfied(r1cs.curve, a, b, c)


@dataclass
class Timing:
    """Where a synthesis went: the partition's data, the witness, the three products and the
    check (the native path computes the last three in one pass, counted as witness)."""

    data_s: float = 0.0
    witness_s: float = 0.0
    products_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.data_s + self.witness_s + self.products_s


def partition_rows(circuit_id: str) -> tuple[int, int]:
    """(witness rows, a/b/c rows) of a partition of ``circuit_id``: the arrays
    ``synthesize_partition_into`` fills."""
    shape = parse_circuit_id(circuit_id)
    return shape.n_vars, shape.n_constraints


def synthesize(shape: CircuitShape, data: PartitionData, *, check: bool = True, timing: Timing | None = None,
               out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None) -> Assignment:
    """The assignment for ``data``, by the shape's witness program (into ``out``, the caller's
    witness, a, b and c, when given); with ``check``, refuse one whose rows do not satisfy
    a·b = c."""
    done = compiled_shape(shape)
    r1cs = done.r1cs
    t0 = time.perf_counter()
    values = program.slot_values(data.flat())
    if out is None:
        rows = r1cs.n_constraints
        witness, a, b, c = (np.empty((n, 4), np.uint64) for n in (r1cs.n_vars, rows, rows, rows))
    else:
        witness, a, b, c = out
    t1 = time.perf_counter()
    bad = program.run(r1cs, done.program, values, witness, a, b, c, check=check)
    if timing is not None:
        timing.data_s += t1 - t0
        timing.witness_s += time.perf_counter() - t1
    if bad is not None:
        raise UnsatisfiedConstraint(bad)
    return Assignment(curve=r1cs.curve, witness=witness, a=a, b=b, c=c, n_public=r1cs.n_public)


def synthesize_in_python(shape: CircuitShape, data: PartitionData, *, check: bool = True,
                         timing: Timing | None = None) -> Assignment:
    """The oracle: the circuit in witness mode on Python ints, then the three CSR products."""
    r1cs = shape.r1cs()
    t0 = time.perf_counter()
    cs = WitnessCS()
    shape.define(cs, data)
    witness = cs.witness()
    t1 = time.perf_counter()
    if witness.shape[0] != r1cs.n_vars:  # the two modes must allocate the same variables
        raise RuntimeError(f"{shape.circuit_id}: witness has {witness.shape[0]} values, matrices {r1cs.n_vars}")
    a, b, c = (matvec(r1cs.curve, m, witness) for m in (r1cs.a, r1cs.b, r1cs.c))
    try:
        if check:
            rows_satisfied(r1cs.curve, a, b, c)
    finally:
        if timing is not None:
            timing.witness_s += t1 - t0
            timing.products_s += time.perf_counter() - t1
    return Assignment(curve=r1cs.curve, witness=witness, a=a, b=b, c=c, n_public=r1cs.n_public)


def python_partition_data(shape: CircuitShape, inputs: dict, index: int) -> PartitionData:
    """The partition's data hashed by the Python Poseidon: the oracle's (and the old path's)."""
    return shape.partition_data(inputs, index, hashes=hash2_many_python)


def _partition(circuit_id: str, inputs: dict, index: int) -> tuple[CircuitShape, PartitionData]:
    shape = parse_circuit_id(circuit_id)
    normalised, partitions = validate_inputs(shape.kind, inputs)
    if not 0 <= index < partitions:
        raise ValueError(f"partition index {index} outside 0..{partitions - 1}")
    return shape, shape.partition_data(normalised, index)


def synthesize_partition(circuit_id: str, inputs: dict, index: int, *, check: bool = True) -> Assignment:
    """Partition ``index`` of a job of circuit ``circuit_id`` ("kind/scale") on ``inputs``."""
    shape, data = _partition(circuit_id, inputs, index)
    return synthesize(shape, data, check=check)


def synthesize_partition_into(circuit_id: str, inputs: dict, index: int, witness: np.ndarray, a: np.ndarray,
                              b: np.ndarray, c: np.ndarray, *, check: bool = True) -> Assignment:
    """``synthesize_partition`` written into the caller's arrays (see the module's docstring)."""
    shape, data = _partition(circuit_id, inputs, index)
    return synthesize(shape, data, check=check, out=(witness, a, b, c))
