"""Fixed-base precomputation for a proving key that proves many times (the engine's keys).

A key's bases never change, so for each of its MSMs a table of shifted copies
Q_t = 2^(t·s)·P (kernels/msm_fixed_base.h) can be made once: the MSM then runs over twice the
points with scalars half as long (the GLV halves cut again), which halves its windows, and
with them its bucket reductions and doublings. The bucket additions stay the same, so this
pays only where the reductions are a large share, on small MSMs; on large ones the bigger
point array costs more in cache misses than it saves. `bench/fixed_base.py` on 2 cores, one
run, with / without (BLS12-381; BN254 alike): G1 0.88 at 2^10 bases, 0.94 at 2^12, 0.98 at
2^13, 1.35 at 2^16; G2 0.99, 0.88, 1.02, 1.28. Whole proofs of 2^10 and 2^12 constraints:
0.90-0.93 on both curves. Hence a table only for MSMs over at most MAX_ROWS live bases.

A table holds COPIES × the live bases' bytes (block 0 is the bases themselves, so the kernel
reads one compact array); ``table_nbytes_bound`` is what the engine reserves with the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from engine.prover.backends.cpu import native

if TYPE_CHECKING:
    from engine.prover.keys import ProvingKey

COPIES = 2
MAX_ROWS = 4096
_TABLES = "fixed_base"  # the tables' entry in pk.extra
# the key's MSM sections and their groups
SECTIONS = {"a_points": "g1", "b1_points": "g1", "b2_points": "g2", "c_points": "g1", "h_points": "g1"}


@dataclass(frozen=True)
class ShiftedTable:
    """One section's copies over its live rows: block t (of ``copies``) is 2^(t·shift) times
    the bases pk.<section>[rows] (all of them when rows is None)."""

    table: np.ndarray
    copies: int
    shift: int
    rows: np.ndarray | None

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes)


def live_rows(pk: ProvingKey, name: str) -> np.ndarray | None:
    """Indices of the key's non-infinity bases in pk.<name> (None when all are live), cached.

    Signals that never occur in A (or B) have the point at infinity there; in circom circuits
    and ours that is often half of them, and skipping them halves those MSMs (the G2 one is
    the dearest) without changing the sum.
    """
    key = f"live:{name}"
    if key not in pk.extra:
        pts = getattr(pk, name)
        live = np.flatnonzero(np.any(pts != 0, axis=1))
        pk.extra[key] = None if live.shape[0] == pts.shape[0] else live
    return cast("np.ndarray | None", pk.extra[key])  # set just above, by this function


def copies_for(rows: int) -> int:
    """How many copies an MSM over ``rows`` bases gets (1: no table)."""
    return COPIES if 0 < rows <= MAX_ROWS else 1


def shift_for(curve: str, group: str, copies: int) -> int:
    """Bits per slice: the GLV halves' bound cut into ``copies`` slices."""
    from engine.prover.params.glv_params import glv_params  # derived on first use: not for one-shot proofs

    return math.ceil(glv_params(curve, group).bits / copies)


def table_nbytes_bound(rows: int, point_bytes: int) -> int:
    """The most a section of ``rows`` points of ``point_bytes`` each can take in tables: what
    the engine reserves with the key before it knows how many of the rows are live."""
    return COPIES * min(rows, MAX_ROWS) * point_bytes if COPIES > 1 else 0


def precompute(pk: ProvingKey, *, threads: int | None = None) -> int:
    """Build the key's tables (kept with the key, once); returns their bytes."""
    if _TABLES not in pk.extra:
        tables: dict[str, ShiftedTable] = {}
        for name, group in SECTIONS.items():
            rows = live_rows(pk, name)
            bases = getattr(pk, name)
            bases = bases if rows is None else bases[rows]
            copies = copies_for(bases.shape[0])
            if copies > 1:
                shift = shift_for(pk.curve, group, copies)
                make = native.g1_shifted_copies if group == "g1" else native.g2_shifted_copies
                tables[name] = ShiftedTable(make(pk.curve, bases, copies, shift, threads=threads), copies, shift, rows)
        pk.extra[_TABLES] = tables
    return tables_nbytes(pk)


def _tables(pk: ProvingKey) -> dict[str, ShiftedTable]:
    return cast(dict[str, ShiftedTable], pk.extra.get(_TABLES) or {})  # set by precompute() only


def tables_nbytes(pk: ProvingKey) -> int:
    return sum(t.nbytes for t in _tables(pk).values())


def msm(pk: ProvingKey, name: str, scalars: np.ndarray) -> np.ndarray:
    """sum scalars[i]·pk.<name>[i] over the section's live rows, through its table when
    precompute made one; scalars has one row per base."""
    group = SECTIONS[name]
    tab = _tables(pk).get(name)
    if tab is not None:
        run = native.msm_g1_copies if group == "g1" else native.msm_g2_copies
        live = scalars if tab.rows is None else scalars[tab.rows]  # a few KB: the table is compact
        return run(pk.curve, tab.table, live, tab.copies, tab.shift)
    rows = live_rows(pk, name)
    if rows is not None and rows.shape[0] == 0:
        return np.zeros(getattr(pk, name).shape[1], np.uint64)
    # the kernel reads the live rows in place: no per-proof copy of the bases
    plain = native.msm_g1 if group == "g1" else native.msm_g2
    return plain(pk.curve, getattr(pk, name), scalars, rows=rows)



def msm_batch(pk: ProvingKey, name: str, scalars: list[np.ndarray]) -> list[np.ndarray]:
    """msm for several scalar vectors over the same section in one pass over its points (the
    batch kernels): result v is msm(pk, name, scalars[v]), the same affine point."""
    if len(scalars) == 1:
        return [msm(pk, name, scalars[0])]
    group = SECTIONS[name]
    stack = np.stack([np.ascontiguousarray(s, dtype=np.uint64) for s in scalars])
    tab = _tables(pk).get(name)
    if tab is not None:
        run = native.msm_g1_copies_batch if group == "g1" else native.msm_g2_copies_batch
        live = stack if tab.rows is None else np.ascontiguousarray(stack[:, tab.rows])
        return list(run(pk.curve, tab.table, live, tab.copies, tab.shift))
    rows = live_rows(pk, name)
    if rows is not None and rows.shape[0] == 0:
        return [np.zeros(getattr(pk, name).shape[1], np.uint64) for _ in scalars]
    plain = native.msm_g1_batch if group == "g1" else native.msm_g2_batch
    return list(plain(pk.curve, getattr(pk, name), stack, rows=rows))
