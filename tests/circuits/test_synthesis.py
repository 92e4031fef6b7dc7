"""Synthesis of every kind: satisfied, deterministic, refusing dishonest witnesses, and the
native path byte-identical with the Python one it replaced."""

from __future__ import annotations

import dataclasses
import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.circuits.cs import limbs_to_ints
from engine.circuits.grain import BLS12_381_R
from engine.circuits.kinds import FIXED_PARTITIONS, SIZES, circuit_for
from engine.circuits.synthesis import (
    check_satisfied,
    partition_rows,
    python_partition_data,
    synthesize,
    synthesize_in_python,
    synthesize_partition,
    synthesize_partition_into,
)
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.r1cs import Assignment
from tests.circuits.test_kinds import inputs_for

KINDS = list(SIZES)


@pytest.mark.parametrize("scale", ["tiny", "small"])
@pytest.mark.parametrize("kind", KINDS)
def test_synthesis_satisfies_the_circuit(kind: str, scale: str) -> None:
    shape = circuit_for(kind, scale)
    assignment = synthesize_partition(shape.circuit_id, inputs_for(kind), 0, check=False)
    check_satisfied(shape.r1cs(), assignment)
    assert limbs_to_ints(assignment.public_inputs) == shape.public_inputs(inputs_for(kind), 0)


@pytest.mark.parametrize("kind", KINDS)
def test_synthesis_of_a_partition_is_bit_identical_each_time(kind: str) -> None:
    circuit_id = f"{kind}/tiny"
    first = synthesize_partition(circuit_id, inputs_for(kind), 0)
    again = synthesize_partition(circuit_id, inputs_for(kind), 0)
    for name in ("witness", "a", "b", "c"):
        assert np.array_equal(getattr(first, name), getattr(again, name))


def test_partitions_of_a_job_differ() -> None:
    a = synthesize_partition("porep-c2/tiny", inputs_for("porep-c2"), 0)
    b = synthesize_partition("porep-c2/tiny", inputs_for("porep-c2"), 9)
    assert not np.array_equal(a.public_inputs, b.public_inputs)


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_leaf_is_refused(kind: str) -> None:
    shape = circuit_for(kind, "tiny")
    data = shape.partition_data(inputs_for(kind), 0)
    data = dataclasses.replace(data, leaves=[data.leaves[0] + 1, *data.leaves[1:]])
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, data)


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_root_is_refused(kind: str) -> None:
    shape = circuit_for(kind, "tiny")
    data = shape.partition_data(inputs_for(kind), 0)
    data = dataclasses.replace(data, roots=[r + 1 for r in data.roots])
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, data)


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_challenge_is_refused(kind: str) -> None:
    # The prover opens the path of the honest position, but the public challenge differs.
    shape = circuit_for(kind, "tiny")
    data = shape.partition_data(inputs_for(kind), 0)
    wrong = (data.challenges[0] + 1) % 2**shape.depth
    data = dataclasses.replace(data, challenges=[wrong, *data.challenges[1:]])
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, data)


def test_opening_another_position_is_refused() -> None:
    # Leaf and path of a position other than the challenged one.
    shape = circuit_for("winning-post", "tiny")
    data = shape.partition_data(inputs_for("winning-post"), 0)
    other = (data.positions[0] + 1) % 2**shape.depth
    honest_other = dataclasses.replace(data, positions=[other])
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, honest_other)


def test_snap_update_refuses_a_new_leaf_not_encoded_with_rho() -> None:
    shape = circuit_for("snap-update", "tiny")
    data = shape.partition_data(inputs_for("snap-update"), 0)
    assert data.rho is not None
    data = dataclasses.replace(data, rho=data.rho + 1)
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, data)


def test_check_satisfied_names_the_failing_constraint() -> None:
    shape = circuit_for("winning-post", "tiny")
    assignment = synthesize_partition(shape.circuit_id, inputs_for("winning-post"), 0)
    witness = assignment.witness.copy()
    witness[1, 0] ^= 1  # the public root: only the last constraint (root equality) sees it
    broken = dataclasses.replace(assignment, witness=witness)
    with pytest.raises(UnsatisfiedConstraint, match=f"^constraint {shape.n_constraints - 1} not satisfied$"):
        check_satisfied(shape.r1cs(), broken)


def test_synthesis_runs_in_a_process_pool() -> None:
    here = synthesize_partition("window-post/tiny", inputs_for("window-post", partitions=2), 1)
    # spawn, not fork: the native kernels start OpenMP threads, and forking a threaded
    # process can deadlock the child.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        there = pool.submit(synthesize_partition, "window-post/tiny", inputs_for("window-post", partitions=2), 1).result()
    assert np.array_equal(here.a, there.a) and np.array_equal(here.witness, there.witness)


def test_partition_index_outside_the_job_is_refused() -> None:
    with pytest.raises(ValueError, match="partition index 1"):
        synthesize_partition("winning-post/tiny", inputs_for("winning-post"), 1)


def python_matvec(m, witness: np.ndarray, modulus: int) -> np.ndarray:
    """Rows of M·w in plain integers: the reference the native sparse product must match."""
    from engine.circuits.cs import ints_to_limbs, limbs_to_ints

    w, coeffs, cols, ptr = limbs_to_ints(witness), limbs_to_ints(m.coeffs), m.cols.tolist(), m.row_ptr.tolist()
    return ints_to_limbs([sum(coeffs[k] * w[cols[k]] for k in range(ptr[i], ptr[i + 1])) % modulus
                          for i in range(m.rows)])


def test_native_products_equal_plain_integer_arithmetic() -> None:
    from engine.circuits import synthesis
    from engine.circuits.grain import BLS12_381_R

    shape = circuit_for("snap-update", "tiny")
    witness = synthesize_partition(shape.circuit_id, inputs_for("snap-update"), 0).witness
    r1cs = shape.r1cs()
    native = [synthesis.matvec(shape.curve, m, witness) for m in (r1cs.a, r1cs.b, r1cs.c)]
    python = [python_matvec(m, witness, BLS12_381_R) for m in (r1cs.a, r1cs.b, r1cs.c)]
    assert all(np.array_equal(x, y) for x, y in zip(native, python, strict=True))


# --- the native path against the Python one (its oracle) ------------------------------------

HEX = st.binary(min_size=32, max_size=32).map(bytes.hex)


def _same_assignment(native, python) -> bool:
    return all(np.array_equal(getattr(native, n), getattr(python, n)) for n in ("witness", "a", "b", "c")) \
        and native.n_public == python.n_public


def _random_inputs(kind: str, seeds: tuple[str, str, str]) -> dict:
    inputs = {"sector_seed": seeds[0], "randomness": seeds[1]}
    if kind == "snap-update":
        inputs["data_seed"] = seeds[2]
    return inputs


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(KINDS), seeds=st.tuples(HEX, HEX, HEX), index=st.integers(0, 15))
def test_a_tiny_partition_of_any_inputs_is_byte_identical_with_the_python_path(kind: str, seeds, index: int) -> None:
    shape = circuit_for(kind, "tiny")
    inputs = _random_inputs(kind, seeds)
    index %= FIXED_PARTITIONS.get(kind, 1)
    data = shape.partition_data(inputs, index)
    assert data == python_partition_data(shape, inputs, index)  # native Poseidon, Python Poseidon
    assert _same_assignment(synthesize(shape, data), synthesize_in_python(shape, data))


@settings(max_examples=6, deadline=None)
@given(kind=st.sampled_from(KINDS), randomness=HEX, index=st.integers(0, 15))
def test_a_small_partition_is_byte_identical_with_the_python_path(kind: str, randomness: str, index: int) -> None:
    # One sector for every example: a small sector tree takes the Python hash a second.
    shape = circuit_for(kind, "small")
    inputs = inputs_for(kind) | {"randomness": randomness}
    index %= FIXED_PARTITIONS.get(kind, 1)
    data = shape.partition_data(inputs, index)
    assert data == python_partition_data(shape, inputs, index)
    assert _same_assignment(synthesize(shape, data), synthesize_in_python(shape, data))


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32), check=st.booleans())
def test_any_data_dishonest_or_not_synthesizes_as_the_python_path_does(kind: str, seed: int, check: bool) -> None:
    """Data values of every size a slot takes (bits of the raw value, the rest reduced mod r);
    with check, both refuse the same first constraint."""
    shape = circuit_for(kind, "tiny")
    rng = random.Random(seed)
    honest = shape.partition_data(inputs_for(kind), 0)
    data = honest.map_values(lambda v: rng.choice([v, v, 0, 1, BLS12_381_R - 1, BLS12_381_R, rng.randrange(2**256)]))
    outcomes: list[Assignment | str] = []
    for path in (synthesize, synthesize_in_python):
        try:
            outcomes.append(path(shape, data, check=check))
        except UnsatisfiedConstraint as e:
            outcomes.append(str(e))
    native, python = outcomes
    assert native == python if isinstance(python, str) else _same_assignment(native, python)


def test_data_outside_256_bits_is_refused_by_name() -> None:
    shape = circuit_for("winning-post", "tiny")
    data = shape.partition_data(inputs_for("winning-post"), 0)
    with pytest.raises(ValueError, match="partition data holds a value outside"):
        synthesize(shape, dataclasses.replace(data, leaves=[2**256]))


def test_synthesis_into_the_callers_arrays_writes_them_and_returns_them() -> None:
    circuit_id, inputs = "porep-c2/tiny", inputs_for("porep-c2")
    n_vars, rows = partition_rows(circuit_id)
    block = np.zeros((n_vars + 3 * rows, 4), np.uint64)  # one block, as a shared-memory segment is
    views = (block[:n_vars], block[n_vars:n_vars + rows], block[n_vars + rows:n_vars + 2 * rows], block[n_vars + 2 * rows:])
    assignment = synthesize_partition_into(circuit_id, inputs, 3, *views)
    assert all(got is view for got, view in zip((assignment.witness, assignment.a, assignment.b, assignment.c), views,
                                                strict=True))
    assert _same_assignment(assignment, synthesize_partition(circuit_id, inputs, 3))


def test_synthesis_into_arrays_of_the_wrong_size_is_refused() -> None:
    n_vars, rows = partition_rows("winning-post/tiny")
    arrays = [np.zeros((n, 4), np.uint64) for n in (n_vars, rows, rows, rows - 1)]
    with pytest.raises(ValueError, match="c: expected"):
        synthesize_partition_into("winning-post/tiny", inputs_for("winning-post"), 0, *arrays)
