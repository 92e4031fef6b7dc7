"""The iden3 binfile container under every snarkjs binary file (.zkey, .wtns, .r1cs): a magic,
a version, then (id, size) sections one after another.

A section's declared size is a u64 an uploader chooses, so every one is held against the
bytes actually left in the file before anything moves past it, and the number of sections is
bounded before the table is walked: a header claiming 2^63 bytes or 4 billion sections is a
FormatError, never a seek, an allocation or a long loop. The error's field is the file's kind
(its magic). Only the standard library: the command-line prover walks tables through here.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from engine.prover.formats.atomic import replaced
from engine.prover.formats.errors import FormatError

# A Groth16 zkey has 10 sections and a witness 2; a few more leaves room for extensions
# while keeping the walk over an uploaded table short.
MAX_SECTIONS = 64

SectionTable = dict[int, tuple[int, int]]  # section id: (payload offset, size)


def section_table(fh: IO[bytes], file_bytes: int, magic: bytes) -> SectionTable:
    """{section id: (offset, size)} of an open binfile, reading only the section headers."""
    kind = magic.decode()
    head = fh.read(12)
    if len(head) < 12:
        raise FormatError(kind, f"too short for a .{kind} file ({file_bytes} bytes)")
    if head[:4] != magic:
        raise FormatError(kind, f"is not a snarkjs .{kind} file")
    (n_sections,) = struct.unpack_from("<I", head, 8)
    if n_sections > MAX_SECTIONS:
        raise FormatError(kind, f"declares {n_sections} sections; a .{kind} file has at most {MAX_SECTIONS}")
    pos = 12
    table: SectionTable = {}
    for _ in range(n_sections):
        raw = fh.read(12)
        if len(raw) < 12:
            raise FormatError(kind, f"is truncated: section header at byte {pos} is incomplete")
        sid, size = struct.unpack("<IQ", raw)
        pos += 12
        if size > file_bytes - pos:
            raise FormatError(kind, f"is truncated or corrupt: section {sid} declares {size} bytes, "
                                    f"only {file_bytes - pos} remain")
        if sid in table:
            raise FormatError(kind, f"has section {sid} twice")
        table[sid] = (pos, size)
        pos += size
        fh.seek(pos)
    return table


def check_ends_at_last_section(table: SectionTable, file_bytes: int, field: str) -> None:
    """Nothing after the last section: a file kept for later (a registered circuit's) is
    exactly what its table describes, not a key with something appended."""
    end = max((offset + size for offset, size in table.values()), default=12)
    if end != file_bytes:
        raise FormatError(field, f"has {file_bytes - end} bytes after its last section")


def read_section(fh: IO[bytes], table: SectionTable, sid: int, limit: int, field: str) -> bytes:
    """A small section whole; ``limit`` bounds what a header section may claim to hold."""
    if sid not in table:
        raise FormatError(field, f"has no section {sid}")
    offset, size = table[sid]
    if size > limit:
        raise FormatError(field, f"section {sid} holds {size} bytes; at most {limit} expected")
    fh.seek(offset)
    return fh.read(size)


def read_span(fh: IO[bytes], span: tuple[int, int], limit: int | None = None) -> bytes:
    """A section's bytes (its first ``limit`` of them), its size already checked by the table."""
    offset, size = span
    fh.seek(offset)
    return fh.read(size if limit is None else min(size, limit))


# ---------------------------------------------------------------------------------------------
# whole files in memory: what the readers that load a file entirely (witness, r1cs) build on


def read_binfile(path: str | os.PathLike[str], magic: bytes) -> tuple[int, dict[int, memoryview]]:
    """Returns (version, {section id: payload}). A repeated section id keeps the first one."""
    data = Path(path).read_bytes()
    return parse_binfile(data, magic, Path(path).name)


def parse_binfile(data: bytes, magic: bytes, name: str = "<bytes>") -> tuple[int, dict[int, memoryview]]:
    kind = magic.decode()
    view = memoryview(data)
    if len(data) < 12:
        raise FormatError(kind, f"{name}: too short for a {kind} file ({len(data)} bytes)")
    if data[:4] != magic:
        raise FormatError(kind, f"{name}: not a {kind} file (magic {bytes(data[:4])!r})")
    version, n_sections = struct.unpack_from("<II", data, 4)
    if n_sections * 12 > len(data) - 12:
        raise FormatError(kind, f"{name}: declares {n_sections} sections, more than its {len(data)} bytes can hold")
    pos = 12
    sections: dict[int, memoryview] = {}
    for _ in range(n_sections):
        if pos + 12 > len(data):
            raise FormatError(kind, f"{name}: truncated section header at byte {pos}")
        sid, size = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if pos + size > len(data):
            raise FormatError(kind, f"{name}: section {sid} claims {size} bytes, only {len(data) - pos} left")
        sections.setdefault(sid, view[pos : pos + size])
        pos += size
    return version, sections


def need(sections: dict[int, memoryview], sid: int, name: str, field: str) -> memoryview:
    if sid not in sections:
        raise FormatError(field, f"{name}: section {sid} missing")
    return sections[sid]


def write_binfile(
    path: str | os.PathLike[str], magic: bytes, version: int, sections: Sequence[tuple[int, Sequence[bytes]]]
) -> None:
    """Writes atomically (engine.prover.formats.atomic) so a reader never sees half a key."""
    with replaced(path) as tmp, open(tmp, "wb") as f:
        f.write(magic + struct.pack("<II", version, len(sections)))
        for sid, parts in sections:
            f.write(struct.pack("<IQ", sid, sum(len(p) for p in parts)))
            for p in parts:
                f.write(p)
