"""Checks on a circom circuit's files at registration, reading headers only.

A zkey runs to hundreds of MB, so nothing here reads one whole: the section table is walked
with seeks and every section's declared size is held against the file's real size and
against what the Groth16 header says it must be (so a truncated or padded key is refused
at upload, not when a job first loads it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from engine.api.uploads import CURVES, BadCircuitFile, zkey_curve

# Sections a snarkjs Groth16 zkey always has: header, Groth16 header, IC, coefficients,
# A, B1, B2, C, H, and the contributions.
ZKEY_SECTIONS = tuple(range(1, 11))
SYM_NAME = "circuit.sym"
# The main component's signal names, taken from the .sym once at registration.
NAMES_FILE = "signal_names.json"
MAX_SECTIONS = 64


@dataclass(frozen=True)
class ZkeyHeader:
    curve: str
    n8q: int
    n8r: int
    n_vars: int
    n_public: int
    domain_size: int


def _table(fh: IO[bytes], size: int, magic: bytes, field: str) -> dict[int, tuple[int, int]]:
    """{section id: (offset, length)}, every section inside the file's ``size`` bytes."""
    head = fh.read(12)
    if len(head) < 12 or head[:4] != magic:
        raise BadCircuitFile(field, f"is not a snarkjs .{magic.decode()} file")
    (count,) = struct.unpack("<I", head[8:12])
    if count > MAX_SECTIONS:
        raise BadCircuitFile(field, f"declares {count} sections; at most {MAX_SECTIONS} are expected")
    found: dict[int, tuple[int, int]] = {}
    pos = 12
    for _ in range(count):
        raw = fh.read(12)
        if len(raw) < 12:
            raise BadCircuitFile(field, f"is truncated: the section table ends at byte {pos}")
        sid, length = struct.unpack("<IQ", raw)
        pos += 12
        if pos + length > size:
            raise BadCircuitFile(field, f"is truncated: section {sid} claims {length} bytes, {size - pos} remain")
        found.setdefault(sid, (pos, length))
        pos += length
        fh.seek(pos)
    if pos != size:
        raise BadCircuitFile(field, f"has {size - pos} bytes after its last section")
    return found


def _expected_lengths(h: ZkeyHeader) -> dict[int, int]:
    g1, g2 = 2 * h.n8q, 4 * h.n8q
    return {3: (h.n_public + 1) * g1, 5: h.n_vars * g1, 6: h.n_vars * g1, 7: h.n_vars * g2,
            8: (h.n_vars - h.n_public - 1) * g1, 9: h.domain_size * g1}


def check_zkey(path: Path) -> ZkeyHeader:
    """The zkey's Groth16 header, once its whole section table is shown consistent."""
    curve = zkey_curve(path)  # protocol, and q of a supported curve
    size = path.stat().st_size
    with open(path, "rb") as fh:
        table = _table(fh, size, b"zkey", "zkey")
        missing = [sid for sid in ZKEY_SECTIONS if sid not in table]
        if missing:
            raise BadCircuitFile("zkey", f"lacks section(s) {', '.join(map(str, missing))} of a Groth16 key")
        fh.seek(table[2][0])
        header = _groth16_header(fh, table[2][1], curve)
        for sid, length in _expected_lengths(header).items():
            if table[sid][1] != length:
                raise BadCircuitFile("zkey", f"section {sid} holds {table[sid][1]} bytes; the header implies {length}")
        fh.seek(table[4][0])
        (n_coef,) = struct.unpack("<I", fh.read(4))
        if table[4][1] != 4 + n_coef * (12 + header.n8r):
            raise BadCircuitFile("zkey", "the coefficients section's length does not match its count")
    return header


def _groth16_header(fh: IO[bytes], length: int, curve: str) -> ZkeyHeader:
    q, r = CURVES[curve]
    raw = fh.read(length)
    try:
        (n8q,) = struct.unpack_from("<I", raw, 0)
        (n8r,) = struct.unpack_from("<I", raw, 4 + n8q)
        got_r = int.from_bytes(raw[8 + n8q: 8 + n8q + n8r], "little")
        n_vars, n_public, domain = struct.unpack_from("<III", raw, 8 + n8q + n8r)
    except struct.error:
        raise BadCircuitFile("zkey", "its Groth16 header is truncated") from None
    if got_r != r:
        raise BadCircuitFile("zkey", "its scalar field is not the curve's")
    if domain < 1 or domain & (domain - 1) or n_public + 1 > n_vars:
        raise BadCircuitFile("zkey", f"its header is inconsistent (nVars {n_vars}, nPublic {n_public}, domain {domain})")
    if length != 8 + n8q + n8r + 12 + 3 * 2 * n8q + 3 * 4 * n8q:
        raise BadCircuitFile("zkey", "its Groth16 header has the wrong length")
    return ZkeyHeader(curve, n8q, n8r, n_vars, n_public, domain)


def check_wasm(path: Path, header: ZkeyHeader) -> None:
    """A circom witness generator compiled for the zkey's scalar field."""
    from engine.circuits.wasm_witness import circuit_prime

    try:
        prime = circuit_prime(path.read_bytes())
    except Exception as exc:  # wasmtime refuses what is not a module of ours, WitnessError what is not circom
        raise BadCircuitFile("wasm", f"is not a circom witness generator ({type(exc).__name__})") from None
    if prime != CURVES[header.curve][1]:
        raise BadCircuitFile("wasm", "was compiled for another field than the zkey's (circom --prime)")


def check_r1cs(path: Path, header: ZkeyHeader) -> None:
    """The constraint system the zkey was set up for: same field, wires and public count."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        table = _table(fh, size, b"r1cs", "r1cs")
        if 1 not in table:
            raise BadCircuitFile("r1cs", "has no header section")
        fh.seek(table[1][0])
        raw = fh.read(table[1][1])
    try:
        (n8,) = struct.unpack_from("<I", raw, 0)
        prime = int.from_bytes(raw[4:4 + n8], "little")
        n_wires, n_out, n_in = struct.unpack_from("<III", raw, 4 + n8)
    except struct.error:
        raise BadCircuitFile("r1cs", "its header is truncated") from None
    if prime != CURVES[header.curve][1]:
        raise BadCircuitFile("r1cs", "is over another field than the zkey's")
    if n_wires != header.n_vars or n_out + n_in != header.n_public:
        raise BadCircuitFile("r1cs", f"does not match the zkey ({n_wires} wires and {n_out + n_in} public "
                                     f"signals; the zkey has {header.n_vars} and {header.n_public})")


def check_sym(path: Path) -> list[str]:
    """The main component's signal names from circom's symbol table (read line by line: a big
    circuit's .sym is as long as its signal count)."""
    from engine.circuits.wasm_witness import top_level_names

    try:
        with open(path, encoding="utf-8") as fh:
            names = top_level_names(fh)
    except UnicodeDecodeError:
        raise BadCircuitFile("sym", "is not a text file") from None
    if not names:
        raise BadCircuitFile("sym", "names no signal of a main component (expected circom --sym output)")
    return names
