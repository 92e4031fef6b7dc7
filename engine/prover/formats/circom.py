"""circom's own outputs that travel beside a circuit's snarkjs files: the .wasm witness
generator (compiled for one field) and the .sym symbol table (signal names, one per line).

Both are checked at a circuit's registration. The .wasm is only inspected for its prime here:
it is the client's code, and runs under budgets in the engine (engine.prover.formats.wasm_witness).
"""

from __future__ import annotations

from pathlib import Path

from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZkeyHeader
from engine.prover.params.curves import get_curve


def check_wasm(path: Path, header: ZkeyHeader) -> None:
    """A circom witness generator compiled for the zkey's scalar field."""
    from engine.prover.formats.wasm_witness import (
        circuit_prime,  # wasmtime loads only for a circuit that brings circom files
    )

    try:
        prime = circuit_prime(path.read_bytes())
    except Exception as exc:  # wasmtime refuses what is not a module of ours, WitnessError what is not circom
        raise FormatError("wasm", f"is not a circom witness generator ({type(exc).__name__})") from None
    if prime != get_curve(header.curve).r:
        raise FormatError("wasm", "was compiled for another field than the zkey's (circom --prime)")


def check_sym(path: Path) -> list[str]:
    """The main component's signal names from circom's symbol table (read line by line: a big
    circuit's .sym is as long as its signal count)."""
    from engine.prover.formats.wasm_witness import top_level_names

    try:
        with open(path, encoding="utf-8") as fh:
            names = top_level_names(fh)
    except UnicodeDecodeError:
        raise FormatError("sym", "is not a text file") from None
    if not names:
        raise FormatError("sym", "names no signal of a main component (expected circom --sym output)")
    return names
