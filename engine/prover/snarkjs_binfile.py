"""The iden3 binfile container under every snarkjs binary file (.r1cs, .zkey, .wtns): magic,
version, a table of (id, size) sections; plus the field checks the readers share.

Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from engine.prover.curves import CURVES, CurveParams
from engine.prover.datatypes import FormatError

# ---------------------------------------------------------------------------------------------
# binfile container


def read_binfile(path: str | os.PathLike[str], magic: bytes) -> tuple[int, dict[int, memoryview]]:
    """Returns (version, {section id: payload}). A repeated section id keeps the first one."""
    data = Path(path).read_bytes()
    return parse_binfile(data, magic, Path(path).name)


def parse_binfile(data: bytes, magic: bytes, name: str = "<bytes>") -> tuple[int, dict[int, memoryview]]:
    view = memoryview(data)
    if len(data) < 12:
        raise FormatError(f"{name}: too short for a {magic.decode()} file ({len(data)} bytes)")
    if data[:4] != magic:
        raise FormatError(f"{name}: not a {magic.decode()} file (magic {bytes(data[:4])!r})")
    version, n_sections = struct.unpack_from("<II", data, 4)
    if n_sections * 12 > len(data) - 12:
        raise FormatError(f"{name}: declares {n_sections} sections, more than its {len(data)} bytes can hold")
    pos = 12
    sections: dict[int, memoryview] = {}
    for _ in range(n_sections):
        if pos + 12 > len(data):
            raise FormatError(f"{name}: truncated section header at byte {pos}")
        sid, size = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if pos + size > len(data):
            raise FormatError(f"{name}: section {sid} claims {size} bytes, only {len(data) - pos} left")
        sections.setdefault(sid, view[pos : pos + size])
        pos += size
    return version, sections


# A Groth16 zkey has 10 sections and a witness 2; a few more leaves room for extensions
# while keeping the walk over an uploaded table short.
MAX_SECTIONS = 64


def section_table(fh: IO[bytes], file_bytes: int, magic: bytes) -> dict[int, tuple[int, int]]:
    """{section id: (offset, size)} of an open binfile, reading only the section headers.

    Every declared size is checked against the bytes actually left in the file before the
    walk moves on, so a header that claims 2^63 bytes is an error, not a seek or an
    allocation. Messages name no file: they are shown to whoever sent it."""
    kind = magic.decode()
    head = fh.read(12)
    if len(head) < 12:
        raise FormatError(f"too short for a .{kind} file ({file_bytes} bytes)")
    if head[:4] != magic:
        raise FormatError(f"is not a snarkjs .{kind} file")
    (n_sections,) = struct.unpack_from("<I", head, 8)
    if n_sections > MAX_SECTIONS:
        raise FormatError(f"declares {n_sections} sections; a .{kind} file has at most {MAX_SECTIONS}")
    pos = 12
    table: dict[int, tuple[int, int]] = {}
    for _ in range(n_sections):
        raw = fh.read(12)
        if len(raw) < 12:
            raise FormatError(f"is truncated: section header at byte {pos} is incomplete")
        sid, size = struct.unpack("<IQ", raw)
        pos += 12
        if size > file_bytes - pos:
            raise FormatError(f"is truncated or corrupt: section {sid} declares {size} bytes, "
                              f"only {file_bytes - pos} remain")
        if sid in table:
            raise FormatError(f"has section {sid} twice")
        table[sid] = (pos, size)
        pos += size
        fh.seek(pos)
    return table


def read_section(fh: IO[bytes], table: dict[int, tuple[int, int]], sid: int, limit: int) -> bytes:
    """A small section whole; ``limit`` bounds what a header section may claim to hold."""
    if sid not in table:
        raise FormatError(f"has no section {sid}")
    offset, size = table[sid]
    if size > limit:
        raise FormatError(f"section {sid} holds {size} bytes; at most {limit} expected")
    fh.seek(offset)
    return fh.read(size)


def section_blocks(fh: IO[bytes], span: tuple[int, int], dtype: np.dtype, block_bytes: int = 1 << 20,
                   skip: int = 0) -> Iterator[np.ndarray]:
    """A section's records in blocks of about ``block_bytes``: bounded memory for any size."""
    offset, size = span
    offset, size = offset + skip, size - skip
    per_block = max(1, block_bytes // dtype.itemsize)
    count = size // dtype.itemsize
    fh.seek(offset)
    done = 0
    while done < count:
        n = min(per_block, count - done)
        block = np.fromfile(fh, dtype=dtype, count=n)
        if block.shape[0] != n:
            raise FormatError("is truncated")
        yield block
        done += n


def write_binfile(
    path: str | os.PathLike[str], magic: bytes, version: int, sections: Sequence[tuple[int, Sequence[bytes]]]
) -> None:
    """Writes atomically (temp file + rename) so a reader never sees half a key."""
    tmp = Path(f"{path}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(magic + struct.pack("<II", version, len(sections)))
        for sid, parts in sections:
            f.write(struct.pack("<IQ", sid, sum(len(p) for p in parts)))
            for p in parts:
                f.write(p)
    os.replace(tmp, path)


def need(sections: dict[int, memoryview], sid: int, name: str) -> memoryview:
    if sid not in sections:
        raise FormatError(f"{name}: section {sid} missing")
    return sections[sid]


def curve_by_prime(prime: int, which: str, name: str) -> CurveParams:
    for c in CURVES.values():
        if (c.r if which == "r" else c.p) == prime:
            return c
    raise FormatError(f"{name}: unsupported field prime {prime} (supported curves: {', '.join(sorted(CURVES))})")


def curve_of(prime: int, which: str, what: str) -> CurveParams:
    for c in CURVES.values():
        if (c.r if which == "r" else c.p) == prime:
            return c
    field = "scalar" if which == "r" else "base"
    raise FormatError(f"{what} is not the {field} field of BN254 or BLS12-381")


def u64_rows(buf: memoryview | bytes, width_limbs: int, count: int, name: str) -> np.ndarray:
    need = count * width_limbs * 8
    if len(buf) < need:
        raise FormatError(f"{name}: expected {need} bytes, found {len(buf)}")
    # copy: the key outlives the file buffer, and kernels want owned, aligned memory
    return np.frombuffer(buf, dtype="<u8", count=count * width_limbs).astype(np.uint64).reshape(count, width_limbs)


def read_u64_rows(fh: IO[bytes], span: tuple[int, int], width_limbs: int, count: int, name: str) -> np.ndarray:
    """A section of ``count`` rows of little-endian u64 limbs, read straight into its aligned
    array: one copy from the page cache, where reading the file and converting its bytes made
    two (at 2^16 that second copy was 3 % of a whole BN254 proof). The caller has checked the
    section's size against the header, so the allocation is what the file holds."""
    offset, size = span
    rows = np.empty((count, width_limbs), dtype=np.uint64)
    if size < rows.nbytes:
        raise FormatError(f"{name}: expected {rows.nbytes} bytes, found {size}")
    fh.seek(offset)
    if fh.readinto(memoryview(rows).cast("B")) != rows.nbytes:
        raise FormatError(f"{name} is truncated")
    if sys.byteorder != "little":
        rows.byteswap(inplace=True)
    return rows


def fr_const(value: int, n: int) -> np.ndarray:
    row = np.frombuffer(value.to_bytes(32, "little"), dtype="<u8").astype(np.uint64)
    return np.ascontiguousarray(np.broadcast_to(row, (n, 4)))


def check_below(values: np.ndarray, modulus: int, what: str) -> None:
    """Vectorised values < modulus over (n, limbs) rows (lexicographic from the top limb)."""
    if values.shape[0] == 0:
        return
    limbs = values.shape[1]
    m = np.frombuffer(modulus.to_bytes(8 * limbs, "little"), dtype="<u8").astype(np.uint64)
    lt = np.zeros(values.shape[0], dtype=bool)
    eq = np.ones(values.shape[0], dtype=bool)
    for k in reversed(range(limbs)):
        lt |= eq & (values[:, k] < m[k])
        eq &= values[:, k] == m[k]
    if not lt.all():
        bad = int(np.argmin(lt))
        raise FormatError(f"{what}: value {bad} is not reduced below the field prime")
