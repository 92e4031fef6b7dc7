"""circom's own outputs that travel beside a circuit's snarkjs files: the .wasm witness
generator (compiled for one field) and the .sym symbol table (signal names, one per line).

Both are checked at a circuit's registration. The .wasm is only probed for its prime and its
input signals here, in a child process with a time and memory limit
(engine.prover.formats.wasm_probe): it is the client's code, and runs under budgets in the
engine (engine.prover.formats.wasm_witness).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZkeyHeader
from engine.prover.params.curves import get_curve


def check_wasm(path: Path, header: ZkeyHeader, names: Sequence[str] = ()) -> dict[str, Any]:
    """A circom witness generator compiled for the zkey's scalar field: its input signals
    (wasm_witness.input_signals, named by ``names`` from the .sym), probed in a child process."""
    from engine.prover.formats.wasm_probe import probe_apart
    from engine.prover.formats.wasm_witness import WitnessError

    try:
        probed = probe_apart(path, names)
    except WitnessError as exc:
        raise FormatError("wasm", f"is not a circom witness generator we could probe ({exc.message})") from None
    if probed["prime"] != get_curve(header.curve).r:
        raise FormatError("wasm", "was compiled for another field than the zkey's (circom --prime)")
    return {"count": probed["count"], "signals": probed["signals"]}


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
