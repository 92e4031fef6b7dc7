"""Synthesis of one partition: witness values, then A·w, B·w, C·w from the compiled matrices.

``synthesize_partition`` is module-level and takes only picklable arguments, so the engine
can run it in a ``ProcessPoolExecutor`` (real cores); each worker process compiles a
circuit's matrices once and keeps them (``CircuitShape.r1cs`` caches per process, and the
compiled matrices are also stored under CACHE_DIR so a new worker loads them in milliseconds).

Use a "spawn" (or "forkserver") pool context: the native kernels start OpenMP threads, and
forking a threaded parent can deadlock the child. Pass ``initializer=configure_worker`` so
each worker's native products use one thread instead of every core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.circuits.cs import WitnessCS
from engine.circuits.kinds import CircuitShape, PartitionData, parse_circuit_id, validate_inputs
from engine.prover.backends.cpu import native
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
    witness_s: float = 0.0
    products_s: float = 0.0


def synthesize(shape: CircuitShape, data: PartitionData, *, check: bool = True, timing: Timing | None = None) -> Assignment:
    """The assignment for ``data``; with ``check``, refuse one whose rows do not satisfy a·b = c."""
    r1cs = shape.r1cs()
    t0 = time.perf_counter()
    cs = WitnessCS()
    shape.define(cs, data)
    witness = cs.witness()
    t1 = time.perf_counter()
    if witness.shape[0] != r1cs.n_vars:  # the two modes must allocate the same variables
        raise RuntimeError(f"{shape.circuit_id}: witness has {witness.shape[0]} values, matrices {r1cs.n_vars}")
    a, b, c = (matvec(r1cs.curve, m, witness) for m in (r1cs.a, r1cs.b, r1cs.c))
    t2 = time.perf_counter()
    if timing is not None:
        timing.witness_s += t1 - t0
        timing.products_s += t2 - t1
    if check:
        rows_satisfied(r1cs.curve, a, b, c)
    return Assignment(curve=r1cs.curve, witness=witness, a=a, b=b, c=c, n_public=r1cs.n_public)


def synthesize_partition(circuit_id: str, inputs: dict, index: int, *, check: bool = True) -> Assignment:
    """Partition ``index`` of a job of circuit ``circuit_id`` ("kind/scale") on ``inputs``."""
    shape = parse_circuit_id(circuit_id)
    normalised, partitions = validate_inputs(shape.kind, inputs)
    if not 0 <= index < partitions:
        raise ValueError(f"partition index {index} outside 0..{partitions - 1}")
    return synthesize(shape, shape.partition_data(normalised, index), check=check)
