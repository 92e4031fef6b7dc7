"""Fixed-base tables: shifted copies of a key's bases, and MSMs through them that equal the
plain ones, so a kept key's proofs are the same proofs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import fixed_base, native
from engine.prover.groth16 import assignment_from_witness, prove, public_inputs_of
from engine.prover.params.curves import CURVES, fr_to_limbs
from engine.prover.params.glv_params import GROUPS, glv_params
from engine.prover.snarkjs import proof_to_json, read_wtns, read_zkey
from engine.prover.verify import verify
from tests.prover.test_glv import limbs, point, to_mont

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
CASES = [(curve, group) for curve in sorted(CURVES) for group in GROUPS]


def bases(curve: str, group: str, ks: list[int | None]) -> np.ndarray:
    c = CURVES[curve]
    return to_mont(c, group, [None if k is None else point(c, group, k) for k in ks])


def shifted_copies(group: str):
    return native.g1_shifted_copies if group == "g1" else native.g2_shifted_copies


def msm_copies(group: str):
    return native.msm_g1_copies if group == "g1" else native.msm_g2_copies


def plain_msm(group: str):
    return native.msm_g1 if group == "g1" else native.msm_g2


@pytest.mark.parametrize(("curve", "group"), CASES)
def test_block_t_of_a_table_is_the_bases_times_two_to_the_t_shifts(curve: str, group: str) -> None:
    pts = bases(curve, group, [3, None, 11])  # the point at infinity stays all-zero
    table = shifted_copies(group)(curve, pts, 3, 5)
    assert np.array_equal(table[:3], pts)
    scalar_mul = native.g1_scalar_mul if group == "g1" else native.g2_scalar_mul
    for t in (1, 2):
        for i in (0, 2):
            assert np.array_equal(table[3 * t + i], scalar_mul(curve, pts[i], 2 ** (5 * t)))
        assert not table[3 * t + 1].any()


@pytest.mark.parametrize(("curve", "group"), CASES)
@pytest.mark.parametrize("copies", [2, 3, 4])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 40))
def test_an_msm_through_the_table_equals_the_plain_one(curve: str, group: str, copies: int, seed: int,
                                                      n: int) -> None:
    c, rng = CURVES[curve], random.Random(seed)
    pts = bases(curve, group, [rng.choice([None, 1, 2, rng.randrange(1, 2**64)]) for _ in range(n)])
    ks = [rng.choice([0, 1, c.r - 1, 2**255 % c.r, rng.randrange(c.r)]) for _ in range(n)]
    scalars = fr_to_limbs(ks)
    shift = math.ceil(glv_params(curve, group).bits / copies)
    table = shifted_copies(group)(curve, pts, copies, shift)
    rows = np.array(sorted(rng.sample(range(n), rng.randint(0, n))), dtype=np.int64)
    for subset in (None, rows):
        got = msm_copies(group)(curve, table, scalars, copies, shift, rows=subset)
        assert np.array_equal(got, plain_msm(group)(curve, pts, scalars, rows=subset))


@pytest.mark.parametrize(("curve", "group"), CASES)
def test_any_256_bit_scalar_goes_through_the_table(curve: str, group: str) -> None:
    # not only reduced ones: the GLV halves of 2^256 - 1 still fit the slices
    c = CURVES[curve]
    pts = bases(curve, group, [7])
    shift = fixed_base.shift_for(curve, group, fixed_base.COPIES)
    table = shifted_copies(group)(curve, pts, fixed_base.COPIES, shift)
    for k in (2**256 - 1, c.r, c.r - 1, 2**128 + 1):
        expect = plain_msm(group)(curve, pts, limbs(k))
        assert np.array_equal(msm_copies(group)(curve, table, limbs(k), fixed_base.COPIES, shift), expect)


def test_a_bad_table_shape_is_refused() -> None:
    pts = bases("bn128", "g1", [1, 2, 3])
    with pytest.raises(ValueError, match="copies"):
        native.msm_g1_copies("bn128", pts, fr_to_limbs([1]), 2, 64)
    with pytest.raises(ValueError, match="do not cover"):
        native.msm_g1_copies("bn128", np.concatenate([pts, pts]), fr_to_limbs([1, 2, 3]), 2, 32)
    with pytest.raises(ValueError, match="positive"):
        native.g1_shifted_copies("bn128", pts, 0, 64)


@pytest.mark.parametrize("curve", sorted(CURVES))
def test_a_key_with_tables_proves_the_same_proof(curve: str) -> None:
    d = FIXTURES / curve
    pk = read_zkey(d / "circuit.zkey")
    asg = assignment_from_witness(pk, read_wtns(d / "witness.wtns", curve))
    plain = prove(pk, asg, r=5, s=7)
    nbytes = fixed_base.precompute(pk)
    tables = pk.extra["fixed_base"]
    assert nbytes > 0 and isinstance(tables, dict) and set(tables) == set(fixed_base.SECTIONS)  # a small key: all five
    with_tables = prove(pk, asg, r=5, s=7)
    assert json.dumps(proof_to_json(with_tables)) == json.dumps(proof_to_json(plain))
    assert verify(pk.vk, prove(pk, asg), public_inputs_of(asg))
    assert fixed_base.precompute(pk) == nbytes  # once per key


def test_only_small_msms_get_a_table() -> None:
    assert fixed_base.copies_for(fixed_base.MAX_ROWS) == fixed_base.COPIES
    assert fixed_base.copies_for(fixed_base.MAX_ROWS + 1) == 1
    assert fixed_base.copies_for(0) == 1
    assert fixed_base.table_nbytes_bound(10**6, 96) == fixed_base.COPIES * fixed_base.MAX_ROWS * 96
