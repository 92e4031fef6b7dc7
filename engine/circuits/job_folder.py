"""What a custom job's folder (DATA_DIR/uploads/<job pk>) holds, by name: the API writes it, the
engine's synthesis reads it, and both take the names from here.

A job proves either a ready witness (``wtns``) or the witness its circuit's generator
(``wasm``) computes from the request's ``inputs`` in the engine's synthesis stage; either way
the key is ``zkey`` (a link to the registered circuit's, or the uploaded one).
"""

from __future__ import annotations

from pathlib import Path

ZKEY = "circuit.zkey"
WTNS = "witness.wtns"
WASM = "circuit.wasm"
INPUTS = "inputs.json"  # the request's input signals, checked and normalised (decimal strings)
R1CS = "circuit.r1cs"


def from_inputs(folder: str | Path) -> bool:
    """Whether the job's witness is still to be computed from its inputs."""
    folder = Path(folder)
    return not (folder / WTNS).exists() and (folder / INPUTS).exists()
