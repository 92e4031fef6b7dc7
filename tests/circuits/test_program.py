"""A circuit's witness program: recorded with its matrices from the circuit run on its data's
slots, refused when it could not compute the witness, bounded when read back from the cache."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.circuits import compiled
from engine.circuits.cs import ShapeCS, Slot
from engine.circuits.kinds import SIZES, circuit_for
from engine.circuits.program import ProgramError, WitnessProgram, check_bounds, check_program, record
from engine.circuits.synthesis import synthesize_partition
from tests.circuits.test_kinds import inputs_for


def _program(shape_kind: str = "winning-post") -> compiled.CompiledShape:
    return compiled.compile_shape(circuit_for(shape_kind, "tiny"))


@pytest.mark.parametrize("kind", list(SIZES))
def test_every_variable_is_an_input_or_solved_from_its_own_row(kind: str) -> None:
    done = _program(kind)
    r1cs, program = done.r1cs, done.program
    inputs, solved = program.ops.shape[0], int(program.solves.sum())
    assert 1 + inputs + solved == r1cs.n_vars
    # the inputs are the data: the publics, the position bits, leaves and siblings
    assert program.slots == len(circuit_for(kind, "tiny").placeholder_data().flat())
    assert set(program.ops[:, 2]) <= set(range(program.slots))


def test_the_slots_number_the_data_in_its_flat_order() -> None:
    data = circuit_for("snap-update", "tiny").placeholder_data()
    slots = [s for s in data.slots().flat() if isinstance(s, Slot)]
    assert [s.index for s in slots] == list(range(len(data.flat())))


def test_a_circuit_that_allocates_a_value_computed_from_its_data_is_refused() -> None:
    cs = ShapeCS()
    x = Slot(0)
    cs.enforce_equal(cs.alloc(x + 1), cs.const(1))  # arithmetic on a slot gives a plain int: no slot
    with pytest.raises(ProgramError, match="1 allocations take a value that is not one of the partition's data"):
        record(cs, slots=1)


def _broken(program: WitnessProgram, **changes: Any) -> WitnessProgram:
    return dataclasses.replace(program, **changes)


def test_a_program_reading_a_variable_before_it_is_defined_is_refused() -> None:
    done = _program()
    ops = np.roll(done.program.ops, -1, axis=0)
    ops[-1, 0] = done.r1cs.n_constraints  # the first input arrives last, after the rows that read it
    with pytest.raises(ProgramError, match="reads variable .* before it is defined"):
        check_program(done.r1cs, _broken(done.program, ops=ops))


def test_a_variable_defined_twice_is_refused() -> None:
    done = _program()
    ops = done.program.ops.copy()
    ops[1, 1] = ops[0, 1]
    with pytest.raises(ProgramError, match="is defined 2 times"):
        check_program(done.r1cs, _broken(done.program, ops=ops))


def test_a_checking_row_marked_solving_is_refused() -> None:
    done = _program()
    solves = done.program.solves.copy()
    solves[-1] = 1  # the root equality: its C row is the public root, already an input
    with pytest.raises(ProgramError):
        check_program(done.r1cs, _broken(done.program, solves=solves))


def test_a_b_row_copied_from_a_different_a_row_is_refused() -> None:
    done = _program()
    b_src = done.program.b_src.copy()
    row = int(np.flatnonzero(b_src >= 0)[0])
    b_src[row] = row - 1
    with pytest.raises(ProgramError, match="a B row copied from an A row differs from it"):
        check_program(done.r1cs, _broken(done.program, b_src=b_src))


def test_a_coefficient_index_naming_another_coefficient_is_refused() -> None:
    done = _program()
    a_coef = done.program.a_coef.copy()
    a_coef[a_coef == 0] = 1  # every coefficient 1 of A read as the table's second value
    with pytest.raises(ProgramError, match="A: an entry's coefficient index names another coefficient"):
        check_program(done.r1cs, _broken(done.program, a_coef=a_coef))


def test_the_coefficient_table_holds_each_distinct_coefficient_once_one_first() -> None:
    table = _program("snap-update").program.coefficients
    assert table[0].tolist() == [1, 0, 0, 0]
    assert len({tuple(row) for row in table.tolist()}) == table.shape[0]


@pytest.mark.parametrize("change", ["slot", "variable", "row", "b_src", "coefficient"])
def test_indices_outside_their_arrays_are_refused_before_the_kernel_follows_them(change: str) -> None:
    done = _program()
    ops, b_src, b_coef = done.program.ops.copy(), done.program.b_src.copy(), done.program.b_coef.copy()
    if change == "slot":
        ops[0, 2] = done.program.slots
    elif change == "variable":
        ops[0, 1] = done.r1cs.n_vars
    elif change == "row":
        ops[-1, 0] = done.r1cs.n_constraints + 1
    elif change == "b_src":
        b_src[0] = 1  # a row after its own
    else:
        b_coef[-1] = done.program.coefficients.shape[0]
    with pytest.raises(ProgramError):
        check_bounds(done.r1cs, _broken(done.program, ops=ops, b_src=b_src, b_coef=b_coef))


def test_a_damaged_cached_program_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shape = circuit_for("window-post", "tiny")
    monkeypatch.setattr(compiled, "_DISK_CACHE", tmp_path / "circuits")
    monkeypatch.setattr(compiled, "_COMPILED", {})
    good = compiled.compile_shape(shape)
    damaged = dataclasses.replace(good.program, ops=good.program.ops + np.array([0, 10**9, 0, 0]))
    compiled.store_cached(shape, dataclasses.replace(good, program=damaged))
    assert compiled.on_disk(shape)
    assert np.array_equal(compiled.witness_program(shape).ops, good.program.ops)
    first = synthesize_partition(shape.circuit_id, inputs_for("window-post"), 0)
    assert first.witness.shape[0] == good.r1cs.n_vars
