"""Checks on a circom circuit's files at registration, reading headers only.

A zkey runs to hundreds of MB, so nothing here reads one whole: the section table is walked
with seeks and every section's declared size is held against the file's real size and
against what the Groth16 header says it must be (so a truncated or padded key is refused
at upload, not when a job first loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from engine.api.satisfaction import CircuitShape, check_structure
from engine.api.uploads import CURVES, BadCircuitFile
from engine.prover.snarkjs import FormatError, ZkeyHeader, section_table, zkey_layout

# Sections a snarkjs Groth16 zkey always has: header, Groth16 header, IC, coefficients,
# A, B1, B2, C, H, and the contributions.
ZKEY_SECTIONS = tuple(range(1, 11))
SYM_NAME = "circuit.sym"
# The main component's signal names, taken from the .sym once at registration.
NAMES_FILE = "signal_names.json"


def _table(fh: IO[bytes], size: int, magic: bytes, field: str) -> dict[int, tuple[int, int]]:
    """{section id: (offset, length)}, every section inside the file and nothing after the last."""
    try:
        table = section_table(fh, size, magic)
    except FormatError as exc:
        raise BadCircuitFile(field, str(exc)) from None
    end = max((offset + length for offset, length in table.values()), default=12)
    if end != size:
        raise BadCircuitFile(field, f"has {size - end} bytes after its last section")
    return table


def check_zkey(path: Path) -> ZkeyHeader:
    """The zkey's Groth16 header, once its whole section table is shown consistent with it."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        table = _table(fh, size, b"zkey", "zkey")
        missing = [sid for sid in ZKEY_SECTIONS if sid not in table]
        if missing:
            raise BadCircuitFile("zkey", f"lacks section(s) {', '.join(map(str, missing))} of a Groth16 key")
        try:
            header, _ = zkey_layout(fh, table)
        except FormatError as exc:
            raise BadCircuitFile("zkey", str(exc)) from None
    return header


def check_wasm(path: Path, header: ZkeyHeader) -> None:
    """A circom witness generator compiled for the zkey's scalar field."""
    from engine.prover.wasm_witness import circuit_prime

    try:
        prime = circuit_prime(path.read_bytes())
    except Exception as exc:  # wasmtime refuses what is not a module of ours, WitnessError what is not circom
        raise BadCircuitFile("wasm", f"is not a circom witness generator ({type(exc).__name__})") from None
    if prime != CURVES[header.curve][1]:
        raise BadCircuitFile("wasm", "was compiled for another field than the zkey's (circom --prime)")


def check_r1cs(path: Path, header: ZkeyHeader) -> None:
    """The constraint system the zkey was set up for: same field, wires and public count, and
    every constraint well formed (read a block at a time), so that each job's witness can be
    checked against it later (engine.api.satisfaction)."""
    check_structure(path, CircuitShape(header.curve, header.n_vars, header.n_public))


def check_sym(path: Path) -> list[str]:
    """The main component's signal names from circom's symbol table (read line by line: a big
    circuit's .sym is as long as its signal count)."""
    from engine.prover.wasm_witness import top_level_names

    try:
        with open(path, encoding="utf-8") as fh:
            names = top_level_names(fh)
    except UnicodeDecodeError:
        raise BadCircuitFile("sym", "is not a text file") from None
    if not names:
        raise BadCircuitFile("sym", "names no signal of a main component (expected circom --sym output)")
    return names
