"""A proving key's warm form: its point arrays memory-mapped from an on-disk image.

Demoting a hot key writes its point arrays (a, b1, b2, c, h: nearly all of a key's bytes) once to
an image of aligned ``.npy`` files in the engine's own directory, then maps them read-only; the
small points and the two coefficient matrices stay in memory. The mapped key proves as a hot one
does (the native kernels read any C-contiguous buffer), without its fixed-base tables: the MSMs
read the bases straight from the map, the kernel paging them in on demand.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.prover.formats.atomic import replaced

MAPPED = ("a_points", "b1_points", "b2_points", "c_points", "h_points")


@dataclasses.dataclass(frozen=True)
class MappedKey:
    key: Any  # the ProvingKey, its point arrays numpy memmaps
    resident_bytes: int  # what stays in anonymous memory (matrices, small points): charged to the budget
    mapped_bytes: int  # the mapped files' size: page cache, read on demand, not charged


def image_dir(root: Path, circuit_id: str) -> Path:
    return root / re.sub(r"[^A-Za-z0-9._-]", "_", circuit_id)


def map_key(pk: Any, root: Path, circuit_id: str) -> MappedKey:
    """``pk`` with its point arrays mapped from its image under ``root`` (written on first use)."""
    where = image_dir(root, circuit_id)
    where.mkdir(parents=True, exist_ok=True)
    mapped: dict[str, np.ndarray] = {}
    for name in MAPPED:
        path = where / f"{name}.npy"
        if not path.exists():  # written to a temporary name first: a half-written image never maps
            with replaced(path) as tmp, open(tmp, "wb") as out:
                np.lib.format.write_array(out, np.ascontiguousarray(getattr(pk, name)))
        mapped[name] = np.load(path, mmap_mode="r")
    warm = dataclasses.replace(pk, extra={}, **mapped)  # no fixed-base tables: those are the hot tier's
    mapped_bytes = sum(int(a.nbytes) for a in mapped.values())
    return MappedKey(warm, int(pk.nbytes) - mapped_bytes, mapped_bytes)
