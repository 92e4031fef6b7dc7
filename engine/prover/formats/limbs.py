"""Sections as rows of little-endian u64 limbs (field elements, points), the numpy side of the
binfile container: read in bounded blocks or straight into an aligned array, and checked
reduced below their field's prime.

An array is only ever sized from a count the caller has already held against the section's
real size (engine.prover.formats.headers), so what is allocated is what the file holds.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import IO

import numpy as np

from engine.prover.formats.errors import FormatError


def section_blocks(fh: IO[bytes], span: tuple[int, int], dtype: np.dtype, field: str,
                   block_bytes: int = 1 << 20, skip: int = 0) -> Iterator[np.ndarray]:
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
            raise FormatError(field, "is truncated")
        yield block
        done += n


def u64_rows(buf: memoryview | bytes, width_limbs: int, count: int, name: str, field: str) -> np.ndarray:
    need = count * width_limbs * 8
    if len(buf) < need:
        raise FormatError(field, f"{name}: expected {need} bytes, found {len(buf)}")
    # copy: the key outlives the file buffer, and kernels want owned, aligned memory
    return np.frombuffer(buf, dtype="<u8", count=count * width_limbs).astype(np.uint64).reshape(count, width_limbs)


def read_u64_rows(fh: io.BufferedIOBase, span: tuple[int, int], width_limbs: int, count: int, name: str,
                  field: str) -> np.ndarray:
    """A section of ``count`` rows of little-endian u64 limbs, read straight into its aligned
    array: one copy from the page cache, where reading the file and converting its bytes made
    two (at 2^16 that second copy was 3 % of a whole BN254 proof). The caller has checked the
    section's size against the header, so the allocation is what the file holds."""
    offset, size = span
    rows = np.empty((count, width_limbs), dtype=np.uint64)
    if size < rows.nbytes:
        raise FormatError(field, f"{name}: expected {rows.nbytes} bytes, found {size}")
    if not rows.nbytes:  # a key without private signals has no C points (and a view of none cannot be cast)
        return rows
    fh.seek(offset)
    if fh.readinto(memoryview(rows).cast("B")) != rows.nbytes:
        raise FormatError(field, f"{name} is truncated")
    if sys.byteorder != "little":
        rows.byteswap(inplace=True)
    return rows


def fr_const(value: int, n: int) -> np.ndarray:
    row = np.frombuffer(value.to_bytes(32, "little"), dtype="<u8").astype(np.uint64)
    return np.ascontiguousarray(np.broadcast_to(row, (n, 4)))


def check_below(values: np.ndarray, modulus: int, what: str, field: str) -> None:
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
        raise FormatError(field, f"{what}: value {bad} is not reduced below the field prime")


def check_reduced(values: np.ndarray, modulus: int, what: str, field: str) -> None:
    """check_below, said without the row's index: a validator reads in blocks, and the index
    within one block would mislead whoever sent the file."""
    try:
        check_below(values, modulus, what, field)
    except FormatError:
        raise FormatError(field, f"{what} is not reduced below the field prime") from None
