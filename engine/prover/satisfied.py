"""Whether an assignment satisfies its rank-1 constraints: the one check every caller makes.

Row i holds when (A·w)_i · (B·w)_i = (C·w)_i in the scalar field; witness[0] is the
constant signal 1 that carries every constraint's constant terms.
"""

from __future__ import annotations

import numpy as np

from engine.prover import native
from engine.prover.datatypes import UnsatisfiedConstraint


def starts_with_one(w: np.ndarray) -> bool:
    """True when the (n, 4)-limb witness is non-empty and its first value is 1."""
    return bool(w.shape[0]) and bool(w[0, 0] == 1) and not w[0, 1:].any()


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
