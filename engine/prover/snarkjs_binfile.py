"""The iden3 binfile container under every snarkjs binary file (.r1cs, .zkey, .wtns): magic,
version, a table of (id, size) sections, read whole or written; plus the numpy row readers and
field checks the readers share. The section table walked without reading the sections, and the
headers, are engine.prover.snarkjs_headers.

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
    if not rows.nbytes:  # a key without private signals has no C points (and a view of none cannot be cast)
        return rows
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
