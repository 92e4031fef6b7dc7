"""The client's witness generator runs on budgets it cannot escape, and a request's inputs are
checked from the circuit's metadata alone, without running it."""

from __future__ import annotations

import pickle
import time

import pytest

from engine.prover.formats.wasm_witness import WitnessError, calculate_witness, check_inputs, fuel_for, input_signals
from engine.prover.params.curves import CURVES
from tests.hostile_wasm import GROWS, LOOPS, generator

R = CURVES["bn128"].r
META = {"count": 3, "signals": {"a": 1, "b": 2}}


def refused(wasm: bytes, *, fuel: int, memory: int, seconds: float) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(WitnessError) as caught:
        calculate_witness(wasm, {"x": "1"}, fuel=fuel, memory=memory, seconds=seconds)
    return caught.value.message, time.monotonic() - started


def test_a_generator_that_never_returns_is_stopped_by_its_instruction_budget() -> None:
    message, _ = refused(generator(LOOPS), fuel=fuel_for(200), memory=64 << 20, seconds=60)
    assert message == "the witness generator ran past its instruction budget"


def test_a_generator_that_never_returns_is_stopped_by_its_time_limit() -> None:
    message, took = refused(generator(LOOPS), fuel=1 << 50, memory=64 << 20, seconds=0.5)
    assert message == "the witness generator ran past its time limit of 0.5 s" and took < 5


def test_a_generator_growing_its_memory_gets_no_more_than_its_limit() -> None:
    message, _ = refused(generator(GROWS), fuel=fuel_for(200), memory=8 << 20, seconds=60)
    assert "ran past its" in message


def test_probing_a_generator_s_inputs_never_runs_it() -> None:
    started = time.monotonic()
    assert input_signals(generator(LOOPS), ["x"]) == {"count": 1, "signals": {"x": 1}}
    assert time.monotonic() - started < 1


def test_a_generator_s_refusal_travels_from_a_synthesis_process_intact() -> None:
    error = pickle.loads(pickle.dumps(WitnessError("b", "takes 2 value(s), got 1")))
    assert (error.signal, error.message, str(error)) == ("b", "takes 2 value(s), got 1", "b: takes 2 value(s), got 1")


@pytest.mark.parametrize("inputs, signal, says", [
    ({"a": "3", "b": ["4", "5"], "zz": "1"}, "zz", "is not an input signal"),
    ({"a": "3", "b": ["4"]}, "b", "takes 2 value(s), got 1"),
    ({"a": str(R + 1), "b": ["4", "5"]}, "a", "outside the circuit's field"),
    ({"a": "3"}, "b", "has no value"),
    ({"a": True, "b": ["4", "5"]}, "a", "not a boolean"),
])
def test_inputs_are_checked_against_the_circuit_s_signals(inputs: dict, signal: str, says: str) -> None:
    with pytest.raises(WitnessError) as caught:
        check_inputs(inputs, META, R)
    assert caught.value.signal == signal and says in caught.value.message


def test_without_the_signals_names_inputs_are_checked_by_count() -> None:
    with pytest.raises(WitnessError, match="1 of 3 values"):
        check_inputs({"a": "3"}, {"count": 3, "signals": None}, R)


def test_checked_inputs_are_flattened_field_elements_in_decimal() -> None:
    assert check_inputs({"a": "-1", "b": [["4"], ["0x10"]]}, META, R) == {"a": [str(R - 1)], "b": ["4", "16"]}
