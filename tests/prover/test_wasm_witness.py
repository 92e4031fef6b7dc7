"""The circom witness computed from the .wasm equals `snarkjs wtns calculate`, and bad inputs
are refused naming the signal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.prover.formats.wasm_witness import WitnessError, calculate_witness, fnv1a64, top_level_names
from engine.prover.snarkjs import read_wtns
from tests.oracle import snarkjs as oracle
from tests.oracle.circom import CircomBuild, circom_product  # noqa: F401  the session fixture

pytestmark = [pytest.mark.node, pytest.mark.slow]

Build = Callable[[str], CircomBuild]
GOOD = {"a": "3", "b": ["4", "5"]}


def snarkjs_witness(build: CircomBuild, inputs: dict, tmp: Path) -> list[int]:
    (tmp / "input.json").write_text(json.dumps(inputs))
    res = oracle.run("wtns", "calculate", build.wasm, tmp / "input.json", tmp / "w.wtns")
    assert res.returncode == 0, res.stderr
    rows = read_wtns(tmp / "w.wtns")
    return [sum(int(limb) << (64 * k) for k, limb in enumerate(row)) for row in rows]


def refusal(build: CircomBuild, inputs: dict) -> WitnessError:
    with pytest.raises(WitnessError) as caught:
        calculate_witness(build.wasm.read_bytes(), inputs)
    return caught.value


def test_signal_names_hash_as_circom_hashes_them() -> None:
    assert fnv1a64("") == 0xCBF29CE484222325 and fnv1a64("a") == 0xAF63DC4C8601EC8C


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_the_witness_equals_snarkjs_wtns_calculate(circom_product: Build, tmp_path: Path, curve: str) -> None:  # noqa: F811
    build = circom_product(curve)
    ours = calculate_witness(build.wasm.read_bytes(), GOOD)
    assert ours == snarkjs_witness(build, GOOD, tmp_path)
    assert ours[:3] == [1, 60, 3]  # the one, the output c, the public input a


def test_negative_values_are_field_elements_as_in_snarkjs(circom_product: Build, tmp_path: Path) -> None:  # noqa: F811
    build = circom_product("bn128")
    inputs = {"a": "-2", "b": ["4", "5"]}
    assert calculate_witness(build.wasm.read_bytes(), inputs) == snarkjs_witness(build, inputs, tmp_path)


def test_a_missing_signal_is_refused(circom_product: Build) -> None:  # noqa: F811
    error = refusal(circom_product("bn128"), {"a": "3"})
    assert error.signal is None and "1 of 3 values" in error.message


def test_a_missing_signal_is_named_from_the_circuits_symbols(circom_product: Build) -> None:  # noqa: F811
    build = circom_product("bn128")
    names = top_level_names(build.sym.read_text().splitlines())
    with pytest.raises(WitnessError) as caught:
        calculate_witness(build.wasm.read_bytes(), {"a": "3"}, names)
    assert caught.value.signal == "b"


def test_the_symbols_name_the_main_components_signals(circom_product: Build) -> None:  # noqa: F811
    names = top_level_names(circom_product("bn128").sym.read_text().splitlines())
    assert sorted(names) == ["a", "b", "c", "t"]


def test_an_unknown_signal_is_refused_by_name(circom_product: Build) -> None:  # noqa: F811
    assert refusal(circom_product("bn128"), {**GOOD, "z": "1"}).signal == "z"


def test_an_array_of_the_wrong_length_is_refused_by_name(circom_product: Build) -> None:  # noqa: F811
    error = refusal(circom_product("bn128"), {"a": "3", "b": ["4"]})
    assert (error.signal, error.message) == ("b", "takes 2 value(s), got 1")


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_a_value_outside_the_field_is_refused_by_name(circom_product: Build, curve: str) -> None:  # noqa: F811
    build = circom_product(curve)
    from engine.api.uploads import CURVES

    error = refusal(build, {"a": str(CURVES[curve][1]), "b": ["4", "5"]})
    assert error.signal == "a" and "outside" in error.message


def test_a_failing_assertion_is_refused_with_the_circuits_message(circom_product: Build) -> None:  # noqa: F811
    error = refusal(circom_product("bn128"), {"a": "7", "b": ["4", "5"]})
    assert "assertion" in error.message and "line" in error.message


def test_a_value_that_is_not_a_number_is_refused_by_name(circom_product: Build) -> None:  # noqa: F811
    assert refusal(circom_product("bn128"), {"a": "three", "b": ["4", "5"]}).signal == "a"


def test_a_circuit_past_its_instruction_budget_is_refused(circom_product: Build) -> None:  # noqa: F811
    with pytest.raises(WitnessError) as caught:
        calculate_witness(circom_product("bn128").wasm.read_bytes(), GOOD, fuel=1000)
    assert "budget" in caught.value.message



def _initial_memory(wasm: bytes) -> int:
    """The bytes of linear memory the generator starts with (its memory's minimum)."""
    import wasmtime

    module = wasmtime.Module(wasmtime.Engine(), wasm)
    (memory,) = [e.type for e in module.exports if isinstance(e.type, wasmtime.MemoryType)]
    return memory.limits.min * 65536


def test_the_witness_is_read_out_whole_or_value_by_value_alike(circom_product: Build, tmp_path: Path) -> None:  # noqa: F811
    # The witness is copied out in one call into pages grown for it; with no room to grow the
    # generator's memory it is read a value at a time. The same values either way.
    build = circom_product("bls12381")
    wasm = build.wasm.read_bytes()
    expected = snarkjs_witness(build, GOOD, tmp_path)
    assert calculate_witness(wasm, GOOD) == expected
    assert calculate_witness(wasm, GOOD, memory=_initial_memory(wasm)) == expected
