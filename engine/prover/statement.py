"""A proof's statement as arrays: the witness and its A·w, B·w, C·w (an Assignment), checked
against the proving key and spread over the key's domain for H. numpy's side of the
orchestration in engine.prover.groth16, which imports this module only when it is handed
arrays, so a proof from mapped files never loads numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from engine.prover.backends.cpu import native
from engine.prover.params.curves import limbs_to_ints
from engine.prover.r1cs import R1CS, Assignment, starts_with_one
from engine.prover.satisfied import check_satisfied

if TYPE_CHECKING:
    from engine.prover.formats.zkey import ZkeyConstraints
    from engine.prover.keys import ProvingKey


def _fr_vec(values: np.ndarray, name: str, rows: int | None = None) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4 or (rows is not None and a.shape[0] != rows):
        raise ValueError(f"{name}: expected uint64 array of shape ({rows if rows is not None else 'n'}, 4), got {a.dtype} {a.shape}")
    return np.ascontiguousarray(a)


def assignment_from_r1cs(r1cs: R1CS, witness: np.ndarray) -> Assignment:
    """A·w, B·w, C·w with the native sparse mat-vec (prove() then checks a·b == c)."""
    w = _fr_vec(witness, "witness", r1cs.n_vars)
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    ev = [native.sparse_matvec(r1cs.curve, m.row_ptr, m.cols, m.coeffs, w) for m in (r1cs.a, r1cs.b, r1cs.c)]
    return Assignment(curve=r1cs.curve, witness=w, a=ev[0], b=ev[1], c=ev[2], n_public=r1cs.n_public)


def assignment_from_witness(pk: ProvingKey | ZkeyConstraints, witness: np.ndarray) -> Assignment:
    """For a snarkjs circuit known only by its .zkey: a, b from section 4, c = a·b.

    The zkey has no C matrix, so this cannot tell whether the witness satisfies the circuit;
    a bad witness gives a proof that fails verification (the prove command checks that).
    """
    w = _fr_vec(witness, "witness")
    if w.shape[0] != pk.n_vars:
        raise ValueError(f"witness has {w.shape[0]} values, the proving key expects {pk.n_vars}")
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    n = pk.n_constraints
    ev = []
    for m in (pk.a_matrix, pk.b_matrix):
        rp = m.row_ptr[: n + 1]
        k = int(rp[-1])
        ev.append(native.sparse_matvec(pk.curve, rp, m.cols[:k], m.coeffs[:k], w))
    c = native.fr_mul(pk.curve, ev[0], ev[1]) if n else np.zeros((0, 4), np.uint64)
    return Assignment(curve=pk.curve, witness=w, a=ev[0], b=ev[1], c=c, n_public=pk.n_public)


def domain_evals(pk: ProvingKey, asg: Assignment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b, c over the whole domain: circuit rows, then one A row per public signal (and the 1)."""
    n, N, P = pk.n_constraints, pk.domain_size, pk.n_public + 1
    a = np.zeros((N, 4), np.uint64)
    b = np.zeros((N, 4), np.uint64)
    c = np.zeros((N, 4), np.uint64)
    a[:n], b[:n], c[:n] = asg.a, asg.b, asg.c
    a[n : n + P] = asg.witness[:P]
    return a, b, c


def validate(pk: ProvingKey, asg: Assignment) -> None:
    if asg.curve != pk.curve:
        raise ValueError(f"assignment is over {asg.curve}, the proving key over {pk.curve}")
    _fr_vec(asg.witness, "witness", pk.n_vars)
    if asg.n_public != pk.n_public:
        raise ValueError(f"assignment has {asg.n_public} public signals, the proving key {pk.n_public}")
    for name in ("a", "b", "c"):
        _fr_vec(getattr(asg, name), name, pk.n_constraints)
    w = asg.witness
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    check_satisfied(pk.curve, asg.a, asg.b, asg.c)


def public_inputs_of(assignment: Assignment) -> list[int]:
    p = assignment.public_inputs
    return limbs_to_ints(p) if p.shape[0] else []


class ArrayStatement:
    """An Assignment as the orchestration's statement (engine.prover.groth16.Statement)."""

    def __init__(self, assignment: Assignment) -> None:
        self.assignment = assignment
        self.witness = assignment.witness
        self.abc_nbytes = int(assignment.a.nbytes + assignment.b.nbytes + assignment.c.nbytes)

    def validate(self, key: ProvingKey) -> None:
        validate(key, self.assignment)

    def evaluations(self, key: ProvingKey) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return domain_evals(key, self.assignment)
