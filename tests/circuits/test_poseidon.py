"""Poseidon poseidonperm_x5_255_3: the published vector, the generated constants, the gadget,
and the native permutation held to the Python one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.circuits import grain, poseidon
from engine.circuits.cs import ShapeCS, WitnessCS, ints_to_limbs, limbs_to_ints
from engine.circuits.poseidon import (
    HASH_CONSTRAINTS,
    hash2,
    hash2_gadget,
    hash2_many,
    hash2_many_python,
    permute,
    permute_many,
)
from engine.circuits.synthesis import check_satisfied, matvec
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.r1cs import Assignment


def test_permutation_matches_the_reference_test_vector() -> None:
    # HadesHash reference implementation, code/test_vectors.txt, entry poseidonperm_x5_255_3
    # (https://extgit.iaik.tugraz.at/krypto/hadeshash): perm([0, 1, 2]).
    assert permute([0, 1, 2]) == [
        0x28CE19420FC246A05553AD1E8C98F5C9D67166BE2C18E9E4CB4B4E317DD2A78A,
        0x51F3E312C95343A896CFD8945EA82BA956C1118CE9B9859B6EA56637B4B1DDC4,
        0x3B2B69139B235626A0BFB56C9527AE66A7BF486AD8C11C14D1DA0C69BBE0F79A,
    ]


def test_committed_constants_are_what_the_grain_generator_produces() -> None:
    committed = Path(poseidon.__file__).with_name("poseidon_constants.py").read_text()
    assert committed == grain.render()


def _hash_circuit(cs, left: int, right: int, digest: int) -> None:
    out = cs.alloc_public(digest)
    a, b = cs.alloc(left), cs.alloc(right)
    cs.enforce_equal(hash2_gadget(cs, a, b), out)


def _assignment(left: int, right: int, digest: int):
    shape = ShapeCS()
    _hash_circuit(shape, 0, 0, 0)
    r1cs = shape.compile()
    cs = WitnessCS()
    _hash_circuit(cs, left, right, digest)
    w = cs.witness()
    abc = [matvec(r1cs.curve, m, w) for m in (r1cs.a, r1cs.b, r1cs.c)]
    return r1cs, Assignment(curve=r1cs.curve, witness=w, a=abc[0], b=abc[1], c=abc[2], n_public=1)


def test_in_circuit_hash_equals_the_native_hash() -> None:
    left, right = 12345, grain.BLS12_381_R - 7
    r1cs, assignment = _assignment(left, right, hash2(left, right))
    check_satisfied(r1cs, assignment)
    assert r1cs.n_constraints == HASH_CONSTRAINTS + 1


def test_in_circuit_hash_rejects_a_wrong_digest() -> None:
    r1cs, assignment = _assignment(1, 2, hash2(1, 2) + 1)
    with pytest.raises(UnsatisfiedConstraint, match=rf"constraint {HASH_CONSTRAINTS} not satisfied"):
        check_satisfied(r1cs, assignment)


def test_gadget_rows_stay_short() -> None:
    # Materialising lanes 1 and 2 bounds every linear combination to a few terms; without it
    # the last partial rounds' rows would carry ~60.
    shape = ShapeCS()
    _hash_circuit(shape, 0, 0, 0)
    r1cs = shape.compile()
    for m in (r1cs.a, r1cs.b, r1cs.c):
        assert int((m.row_ptr[1:] - m.row_ptr[:-1]).max()) <= 8


_VALUES = st.one_of(st.sampled_from([0, 1, grain.BLS12_381_R - 1, grain.BLS12_381_R, 2**256 - 1]),
                    st.integers(0, 2**256 - 1))


@settings(max_examples=40, deadline=None)
@given(pairs=st.lists(st.tuples(_VALUES, _VALUES), max_size=8))
def test_native_hashes_equal_the_python_ones(pairs: list[tuple[int, int]]) -> None:
    lefts, rights = [x for x, _ in pairs], [y for _, y in pairs]
    assert hash2_many(lefts, rights) == hash2_many_python(lefts, rights)


@settings(max_examples=40, deadline=None)
@given(states=st.lists(st.lists(st.integers(0, grain.BLS12_381_R - 1), min_size=3, max_size=3), min_size=1, max_size=4))
def test_the_native_permutation_is_the_python_one(states: list[list[int]]) -> None:
    flat = ints_to_limbs([x for s in states for x in s]).reshape(-1, 3, 4)
    got = limbs_to_ints(permute_many(flat).reshape(-1, 4))
    assert [got[3 * i: 3 * i + 3] for i in range(len(states))] == [permute(s) for s in states]
