"""The shared shapes between circuits and the prover: an R1CS and one partition's assignment.

Field elements cross this boundary as numpy uint64 arrays of shape (n, 4): four 64-bit
little-endian limbs in standard (not Montgomery) form, each value < r. Both curves' scalar
fields fit in four limbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def starts_with_one(w: np.ndarray) -> bool:
    """True when the (n, 4)-limb witness is non-empty and its first value is 1: witness[0] is
    the constant signal that carries every constraint's constant terms."""
    return bool(w.shape[0]) and bool(w[0, 0] == 1) and not w[0, 1:].any()


@dataclass(frozen=True)
class SparseMatrix:
    """CSR rows over variables: row i is sum(coeffs[k] * w[cols[k]] for k in row_ptr[i]:row_ptr[i+1])."""

    row_ptr: np.ndarray  # int64, shape (rows + 1,)
    cols: np.ndarray  # int64, shape (nnz,)
    coeffs: np.ndarray  # uint64, shape (nnz, 4), standard form

    @property
    def rows(self) -> int:
        return int(self.row_ptr.shape[0] - 1)

    @property
    def nnz(self) -> int:
        return int(self.cols.shape[0])


@dataclass(frozen=True)
class R1CS:
    """A rank-1 constraint system in snarkjs's variable order.

    Variable 0 is the constant 1, variables 1..n_public are the public signals, the rest are
    private. Constraint i holds (A_i · w) * (B_i · w) = (C_i · w).
    """

    curve: str  # "bls12381" or "bn128"
    n_vars: int
    n_public: int
    a: SparseMatrix
    b: SparseMatrix
    c: SparseMatrix

    @property
    def n_constraints(self) -> int:
        return self.a.rows

    @property
    def domain_size(self) -> int:
        """snarkjs's domain: room for every constraint plus one row per public signal and the 1."""
        needed = self.n_constraints + self.n_public + 1
        return 1 << (needed - 1).bit_length()


@dataclass(frozen=True)
class Assignment:
    """One partition, synthesized: the full witness and its constraint-row evaluations.

    a/b/c hold A·w, B·w, C·w for the R1CS's own constraints only (n_constraints rows); the
    prover adds snarkjs's extra public-input rows itself.
    """

    curve: str
    witness: np.ndarray  # (n_vars, 4) uint64, witness[0] == 1
    a: np.ndarray  # (n_constraints, 4)
    b: np.ndarray
    c: np.ndarray
    n_public: int

    @property
    def public_inputs(self) -> np.ndarray:
        return self.witness[1 : 1 + self.n_public]

    @property
    def nbytes(self) -> int:
        return int(self.witness.nbytes + self.a.nbytes + self.b.nbytes + self.c.nbytes)
