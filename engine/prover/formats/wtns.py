""".wtns witnesses: read whole, written, validated against a key a block at a time, or
memory-mapped for a satisfaction check.

A witness is its field's prime and a count (section 1), then that many 32-byte values
(section 2); the count is held against section 2's real size before any array is sized
from it (engine.prover.formats.headers). Values are little-endian limbs, read straight into
numpy. Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import IO

import numpy as np

from engine.prover.formats.binfile import need, read_binfile, section_table, write_binfile
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import WtnsHeader, ZkeyHeader, wtns_header, wtns_layout
from engine.prover.formats.limbs import check_below, check_reduced, section_blocks, u64_rows
from engine.prover.params.curves import get_curve
from engine.prover.r1cs import starts_with_one

N8 = 32  # bytes per value: both curves' scalar fields fit 32, and snarkjs writes exactly that
VALUE = np.dtype(("<u8", (4,)))


def read_wtns(path: str | os.PathLike[str], curve: str | None = None) -> np.ndarray:
    """The witness, (n, 4) uint64 standard form; with curve, also checks the file's field."""
    found, w = read_wtns_with_curve(path)
    if curve is not None and found != get_curve(curve).name:
        raise FormatError("wtns", f"{Path(path).name}: witness is over {found}, expected {get_curve(curve).name}")
    return w


def read_wtns_with_curve(path: str | os.PathLike[str]) -> tuple[str, np.ndarray]:
    """Returns (curve name, witness (n, 4) uint64 standard form)."""
    name = Path(path).name
    _, sec = read_binfile(path, b"wtns")
    values = need(sec, 2, name, "wtns")
    try:
        head = wtns_header(need(sec, 1, name, "wtns"), len(values))
    except FormatError as exc:
        raise exc.naming(name) from None
    curve = get_curve(head.curve)
    w = u64_rows(values, 4, head.n_values, f"{name} section 2", "wtns")
    check_below(w, curve.r, name, "wtns")
    if not starts_with_one(w):
        raise FormatError("wtns", f"{name}: witness[0] must be 1")
    return curve.name, w


def write_wtns(path: str | os.PathLike[str], curve: str, witness: np.ndarray) -> None:
    c = get_curve(curve)
    w = np.ascontiguousarray(witness, dtype=np.uint64)
    head = struct.pack("<I", N8) + c.r.to_bytes(N8, "little") + struct.pack("<I", w.shape[0])
    write_binfile(path, b"wtns", 2, [(1, [head]), (2, [w.astype("<u8").tobytes()])])


def validate_wtns(fh: IO[bytes], size: int, zkey: ZkeyHeader) -> WtnsHeader:
    """The witness of an open file of ``size`` bytes, checked for the key: its field, its value
    size and count, every value reduced, and witness[0] = 1; read about a MiB at a time."""
    table, head = wtns_layout(fh, size)
    if head.curve != zkey.curve:
        raise FormatError("wtns", f"is a witness over {get_curve(head.curve).name}'s scalar field; the zkey is "
                                  f"over {get_curve(zkey.curve).name}")
    if head.n8 != zkey.n8r:
        raise FormatError("wtns", f"has {head.n8}-byte values; the zkey's n8r is {zkey.n8r}")
    if head.n_values != zkey.n_vars:
        raise FormatError("wtns", f"holds {head.n_values} values; the zkey's circuit has nVars = {zkey.n_vars}")
    first = True
    for block in section_blocks(fh, table[2], VALUE, "wtns"):
        check_reduced(block, get_curve(zkey.curve).r, "a witness value", "wtns")
        if first and not starts_with_one(block):
            raise FormatError("wtns", "witness[0] must be 1 (the constant signal)")
        first = False
    return head


def witness_values(path: Path, n_vars: int) -> np.ndarray:
    """The ``n_vars`` values of a witness already validated, memory-mapped from its file rather
    than read into the heap."""
    with open(path, "rb") as fh:
        table = section_table(fh, path.stat().st_size, b"wtns")
    if 2 not in table:
        raise FormatError("wtns", "has no section 2 (the values)")
    offset, size = table[2]
    if size != n_vars * N8:
        raise FormatError("wtns", f"holds {size // N8} values; the circuit has {n_vars} signals")
    return np.memmap(path, dtype=np.uint64, mode="r", offset=offset, shape=(n_vars, 4))
