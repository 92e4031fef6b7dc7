"""The one satisfiedness check the prover, the circuits and the upload check all share."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.params.curves import fr_to_limbs, get_curve
from engine.prover.r1cs import starts_with_one
from engine.prover.satisfied import check_satisfied, first_unsatisfied

R = get_curve("bn128").r


@given(st.lists(st.integers(0, R - 1), min_size=1, max_size=20), st.lists(st.integers(0, R - 1), min_size=1, max_size=20))
def test_the_first_row_whose_product_is_wrong_is_named(xs: list[int], ys: list[int]) -> None:
    n = min(len(xs), len(ys))
    a, b = fr_to_limbs(xs[:n]), fr_to_limbs(ys[:n])
    c = fr_to_limbs([x * y % R for x, y in zip(xs[:n], ys[:n], strict=True)])
    assert first_unsatisfied("bn128", a, b, c) is None
    broken = c.copy()
    broken[n - 1, 0] ^= 1
    assert first_unsatisfied("bn128", a, b, broken) == n - 1
    with pytest.raises(UnsatisfiedConstraint, match=rf"^constraint {n - 1} not satisfied$"):
        check_satisfied("bn128", a, b, broken)


def test_a_witness_must_open_with_the_constant_one() -> None:
    assert starts_with_one(fr_to_limbs([1, 5]))
    assert not starts_with_one(fr_to_limbs([1 + (1 << 64), 5]))
    assert not starts_with_one(fr_to_limbs([0, 1]))
    assert not starts_with_one(np.zeros((0, 4), np.uint64))
