"""Groth16 keys in the prover's memory layout.

Points are numpy uint64 arrays of affine Montgomery limbs (curves.py conventions: G1 rows of
2L limbs, G2 rows of 4L limbs, all zeros = infinity), which is exactly the byte layout of a
snarkjs .zkey section, so keys load without per-point Python work. Section 4's coefficients
are kept as two CSR matrices over the domain rows (standard-form scalars), which is what the
native sparse mat-vec takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from engine.prover.params.curves import G1Affine, G2Affine, get_curve
from engine.prover.r1cs import SparseMatrix

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class VerifyingKey:
    """What a verifier needs, as affine Python ints (None = infinity)."""

    curve: str
    n_public: int
    alpha1: G1Affine
    beta2: G2Affine
    gamma2: G2Affine
    delta2: G2Affine
    ic: tuple[G1Affine | None, ...]  # n_public + 1 points

    @classmethod
    def of_points(
        cls,
        curve: str,
        n_public: int,
        alpha1: G1Affine | None,
        beta2: G2Affine | None,
        gamma2: G2Affine | None,
        delta2: G2Affine | None,
        ic: Iterable[G1Affine | None],
    ) -> VerifyingKey:
        """The key of these points, whether read from a file or derived from a proving key.
        ValueError naming which of alpha1/beta2/gamma2/delta2 is the point at infinity: no
        setup makes one, and gamma2 or delta2 there would drop the public inputs or C from the
        verifier's equation."""
        if alpha1 is None or beta2 is None or gamma2 is None or delta2 is None:
            fixed = {"alpha1": alpha1, "beta2": beta2, "gamma2": gamma2, "delta2": delta2}
            at_infinity = ", ".join(name for name, pt in fixed.items() if pt is None)
            raise ValueError(f"verification key: the point at infinity as {at_infinity}")
        return cls(curve, n_public, alpha1, beta2, gamma2, delta2, tuple(ic))  # the fields' order, above


@dataclass(eq=False)
class ProvingKey:
    curve: str
    n_vars: int
    n_public: int
    domain_size: int
    n_constraints: int  # the circuit's own rows; rows n_constraints..n_constraints+n_public are the public-input rows
    alpha1: np.ndarray  # (2L,)
    beta1: np.ndarray  # (2L,)
    beta2: np.ndarray  # (4L,)
    gamma2: np.ndarray  # (4L,)
    delta1: np.ndarray  # (2L,)
    delta2: np.ndarray  # (4L,)
    ic: np.ndarray  # (n_public + 1, 2L)
    a_points: np.ndarray  # (n_vars, 2L)
    b1_points: np.ndarray  # (n_vars, 2L)
    b2_points: np.ndarray  # (n_vars, 4L)
    c_points: np.ndarray  # (n_vars - n_public - 1, 2L)
    h_points: np.ndarray  # (domain_size, 2L)
    a_matrix: SparseMatrix  # domain_size rows, public-input rows included (snarkjs section 4, matrix 0)
    b_matrix: SparseMatrix  # domain_size rows (section 4, matrix 1)
    cs_hash: bytes = b"\0" * 64
    provenance: str = ""  # e.g. "development setup (single party, not a ceremony)"
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        c = get_curve(self.curve)
        L = c.fp_limbs
        checks = {
            "alpha1": (self.alpha1, (2 * L,)),
            "beta1": (self.beta1, (2 * L,)),
            "beta2": (self.beta2, (4 * L,)),
            "gamma2": (self.gamma2, (4 * L,)),
            "delta1": (self.delta1, (2 * L,)),
            "delta2": (self.delta2, (4 * L,)),
            "ic": (self.ic, (self.n_public + 1, 2 * L)),
            "a_points": (self.a_points, (self.n_vars, 2 * L)),
            "b1_points": (self.b1_points, (self.n_vars, 2 * L)),
            "b2_points": (self.b2_points, (self.n_vars, 4 * L)),
            "c_points": (self.c_points, (self.n_vars - self.n_public - 1, 2 * L)),
            "h_points": (self.h_points, (self.domain_size, 2 * L)),
        }
        for name, (arr, shape) in checks.items():
            if arr.dtype.name != "uint64" or arr.shape != shape:
                raise ValueError(f"proving key {name}: expected uint64 {shape}, got {arr.dtype} {arr.shape}")
        for name, m in (("A", self.a_matrix), ("B", self.b_matrix)):
            if m.rows != self.domain_size:
                raise ValueError(f"proving key {name} matrix: expected {self.domain_size} rows, got {m.rows}")
        if self.n_constraints + self.n_public + 1 > self.domain_size:
            raise ValueError("proving key: domain too small for its constraints and public inputs")

    @property
    def n_private(self) -> int:
        return self.n_vars - self.n_public - 1

    @property
    def nbytes(self) -> int:
        """Bytes this key holds in memory (points and coefficients), for the memory budget."""
        arrays = [
            self.alpha1, self.beta1, self.beta2, self.gamma2, self.delta1, self.delta2, self.ic,
            self.a_points, self.b1_points, self.b2_points, self.c_points, self.h_points,
        ]
        for m in (self.a_matrix, self.b_matrix):
            arrays += [m.row_ptr, m.cols, m.coeffs]
        return int(sum(a.nbytes for a in arrays))

    @cached_property
    def vk(self) -> VerifyingKey:
        from engine.prover.params.curves import g1_from_mont, g2_from_mont

        alpha1 = g1_from_mont(self.alpha1, self.curve)[0]
        beta2, gamma2, delta2 = g2_from_mont([self.beta2, self.gamma2, self.delta2], self.curve)
        return VerifyingKey.of_points(
            self.curve, self.n_public, alpha1, beta2, gamma2, delta2, g1_from_mont(self.ic, self.curve)
        )

