"""Whether an assignment satisfies its rank-1 constraints: the one check every caller makes.

Row i holds when (A·w)_i · (B·w)_i = (C·w)_i in the scalar field; witness[0] is the
constant signal 1 that carries every constraint's constant terms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.prover.backends.cpu import native
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.formats.errors import FormatError
from engine.prover.formats.r1cs import CircuitShape, constraint_blocks
from engine.prover.formats.wtns import witness_values


def first_unsatisfied(curve: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> int | None:
    """Index of the first row with a·b ≠ c (vectorised, native), or None."""
    if a.shape[0] == 0:
        return None
    bad = np.any(native.fr_mul(curve, a, b) != c, axis=1)
    return int(np.argmax(bad)) if bad.any() else None


def check_satisfied(curve: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """Raise UnsatisfiedConstraint naming the first row with a·b ≠ c."""
    row = first_unsatisfied(curve, a, b, c)
    if row is not None:
        raise UnsatisfiedConstraint(row)


def check_file_satisfied(r1cs: Path, wtns: Path, circuit: CircuitShape) -> None:
    """FormatError naming ``r1cs`` when the r1cs is malformed or not ``circuit``'s, or ``wtns``
    when the witness (already validated) fails one of its constraints. In bounded memory: the
    r1cs a block at a time (formats.r1cs.constraint_blocks), the witness mapped from its file."""
    w = witness_values(wtns, circuit.n_vars)
    for done, matrices in constraint_blocks(r1cs, circuit):
        a, b, c = (native.sparse_matvec(circuit.curve, *m, w) for m in matrices)
        bad = first_unsatisfied(circuit.curve, a, b, c)
        if bad is not None:
            raise FormatError("wtns", f"does not satisfy the circuit: constraint {done + bad} of the r1cs fails "
                                      "(A·w · B·w ≠ C·w)")
