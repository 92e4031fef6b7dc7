""".zkey Groth16 proving keys: read into a ProvingKey (or only its constraint matrices), written
from one, validated in full before a custom upload becomes a job, and checked at a circuit's
registration from its headers alone.

The header and every section's size are checked first (engine.prover.formats.headers), so
each array is as large as the file really is. zkey points are already affine Montgomery
limbs, our in-memory layout, so the big sections are read straight into numpy arrays; the
validators read them in blocks of about a MiB instead, whatever the file declares.
snarkjs stores each coefficient as c·R² mod r; converting takes the scalar field's multiply,
which is a backend's kernel, so the readers and the writer are handed it (``fr_mul``, the
signature of the CPU backend's ``native.fr_mul``) and the formats import no backend:
engine.prover.snarkjs passes it.
Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from engine.prover.datatypes import ProvingKey
from engine.prover.formats.binfile import (
    SectionTable,
    check_ends_at_last_section,
    read_section,
    read_span,
    section_table,
    write_binfile,
)
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import (
    ZKEY_HEADER_MAX,
    ZKEY_SECTION_NAMES,
    ZkeyHeader,
    groth16_layout,
    zkey_layout,
)
from engine.prover.formats.limbs import check_below, check_reduced, fr_const, read_u64_rows, section_blocks
from engine.prover.params.curves import CurveParams, get_curve
from engine.prover.r1cs import R1CS, SparseMatrix

# The scalar field's elementwise multiply of two (n, 4)-limb arrays, standard form: fr_mul(curve, a, b).
FrMul = Callable[[str, np.ndarray, np.ndarray], np.ndarray]
# One section 4 entry: matrix (0 = A, 1 = B), constraint, signal, value (c·R² mod r).
COEF_DTYPE = np.dtype([("m", "<u4"), ("c", "<u4"), ("s", "<u4"), ("v", "<u8", (4,))])
# The sections of points whose every coordinate must be below q (section 2's are checked too).
POINT_SECTIONS = (3, 5, 6, 7, 8, 9)
# Sections a snarkjs Groth16 zkey always has: header, Groth16 header, IC, coefficients,
# A, B1, B2, C, H, and the contributions.
ZKEY_SECTIONS = tuple(range(1, 11))

# ---------------------------------------------------------------------------------------------
# reading


def _csr_from_entries(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_rows: int) -> SparseMatrix:
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=n_rows)
    row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return SparseMatrix(
        row_ptr=row_ptr,
        cols=cols[order].astype(np.int64),
        coeffs=np.ascontiguousarray(vals[order], dtype=np.uint64),
    )


def read_zkey(path: str | os.PathLike[str], fr_mul: FrMul) -> ProvingKey:
    """The whole Groth16 key: its layout checked against the header first, then each point
    section read into its own array. ``fr_mul``: the scalar field's multiply (module docstring)."""
    name = Path(path).name
    with open(path, "rb") as fh:
        try:
            table, head, n_coef = groth16_layout(fh)
            c = get_curve(head.curve)
            L, n_vars, n_public = c.fp_limbs, head.n_vars, head.n_public

            def rows(sid: int, width: int, count: int) -> np.ndarray:
                return read_u64_rows(fh, table[sid], width, count, f"section {sid} ({ZKEY_SECTION_NAMES[sid]})",
                                     "zkey")

            header_points = np.frombuffer(read_section(fh, table, 2, ZKEY_HEADER_MAX, "zkey")[head.points_offset :],
                                          dtype="<u8").astype(np.uint64)
            ic, a_points = rows(3, 2 * L, n_public + 1), rows(5, 2 * L, n_vars)
            b1_points, b2_points = rows(6, 2 * L, n_vars), rows(7, 4 * L, n_vars)
            c_points, h_points = rows(8, 2 * L, n_vars - n_public - 1), rows(9, 2 * L, head.domain_size)
            coef_sec = read_span(fh, table[4])
            cs_hash = read_span(fh, table[10], limit=64)
        except FormatError as exc:
            raise exc.naming(name) from None
        except struct.error as exc:
            raise FormatError("zkey", f"{name}: {exc}") from None
    o = 0
    hdr: list[np.ndarray] = []
    for width in (2 * L, 2 * L, 4 * L, 4 * L, 2 * L, 4 * L):  # alpha1 beta1 beta2 gamma2 delta1 delta2
        hdr.append(header_points[o : o + width].copy())
        o += width
    a_m, b_m, n_constraints = _constraint_matrices(c, head, coef_sec, n_coef, name, fr_mul)
    return ProvingKey(
        curve=c.name, n_vars=n_vars, n_public=n_public, domain_size=head.domain_size, n_constraints=n_constraints,
        alpha1=hdr[0], beta1=hdr[1], beta2=hdr[2], gamma2=hdr[3], delta1=hdr[4], delta2=hdr[5],
        a_matrix=a_m, b_matrix=b_m, cs_hash=cs_hash, ic=ic, a_points=a_points, b1_points=b1_points,
        b2_points=b2_points, c_points=c_points, h_points=h_points,
    )


def _constraint_matrices(c: CurveParams, head: ZkeyHeader, coef_sec: bytes | memoryview, n_coef: int,
                         name: str, fr_mul: FrMul) -> tuple[SparseMatrix, SparseMatrix, int]:
    """Section 4's entries as the A and B matrices (CSR, standard form) and the constraint count."""
    n_vars, n_public, domain_size = head.n_vars, head.n_public, head.domain_size
    ent = np.frombuffer(coef_sec, dtype=COEF_DTYPE, count=n_coef, offset=4)
    mats = ent["m"]
    if n_coef and (mats.max() > 1 or ent["c"].max() >= domain_size or ent["s"].max() >= n_vars):
        raise FormatError("zkey", f"{name}: coefficient entry out of range")
    vals = np.ascontiguousarray(ent["v"], dtype=np.uint64)
    check_below(vals, c.r, f"{name} coefficients", "zkey")
    # stored as coef·R² mod r (snarkjs multiplies by R² so its Montgomery product with a plain
    # witness value lands in Montgomery form); undo it once here, vectorised
    rinv2 = pow(1 << 256, -2, c.r)
    vals = fr_mul(c.name, vals, fr_const(rinv2, n_coef)) if n_coef else vals
    a_sel, b_sel = mats == 0, mats == 1
    rows = ent["c"].astype(np.int64)
    cols = ent["s"].astype(np.int64)
    a_m = _csr_from_entries(rows[a_sel], cols[a_sel], vals[a_sel], domain_size)
    b_m = _csr_from_entries(rows[b_sel], cols[b_sel], vals[b_sel], domain_size)
    # the public-input rows (signal i at row n_constraints + i) are A's last non-empty rows
    a_rows = rows[a_sel]
    n_constraints = int(a_rows.max()) + 1 - (n_public + 1) if a_rows.size else 0
    n_constraints = max(n_constraints, 0)
    return a_m, b_m, n_constraints


@dataclass(frozen=True)
class ZkeyConstraints:
    """What synthesis from a snarkjs witness needs of a zkey: its A and B matrices, not its points."""

    curve: str
    n_vars: int
    n_public: int
    n_constraints: int
    a_matrix: SparseMatrix
    b_matrix: SparseMatrix


def read_zkey_constraints(path: str | os.PathLike[str], fr_mul: FrMul) -> ZkeyConstraints:
    """The zkey's header and coefficients only (sections 1, 2 and 4): a fraction of the file."""
    name = Path(path).name
    with open(path, "rb") as fh:
        try:
            table, head, n_coef = groth16_layout(fh)
            coef_sec = read_span(fh, table[4])
        except FormatError as exc:
            raise exc.naming(name) from None
        except struct.error as exc:
            raise FormatError("zkey", f"{name}: {exc}") from None
    c = get_curve(head.curve)
    a_m, b_m, n_constraints = _constraint_matrices(c, head, coef_sec, n_coef, name, fr_mul)
    return ZkeyConstraints(curve=c.name, n_vars=head.n_vars, n_public=head.n_public,
                           n_constraints=n_constraints, a_matrix=a_m, b_matrix=b_m)


# ---------------------------------------------------------------------------------------------
# validating an upload in full


@dataclass(frozen=True)
class ValidZkey:
    """What a validated key declares, and the constraint count its coefficients imply."""

    header: ZkeyHeader
    n_coefficients: int
    n_constraints: int


def validate_zkey(fh: IO[bytes], size: int) -> ValidZkey:
    """Everything the engine will later read, checked against the file's real ``size``: the
    section table, the header and every section's size, every coefficient entry, the
    public-input rows and domain snarkjs derives, and every point coordinate below q."""
    table = section_table(fh, size, b"zkey")
    protocol = read_section(fh, table, 1, 4, "zkey")
    if len(protocol) != 4 or int.from_bytes(protocol, "little") != 1:
        raise FormatError("zkey", "is not a Groth16 key (section 1 must hold protocol 1; only Groth16 is proved here)")
    header, n_coef = zkey_layout(fh, table)
    n_constraints = _check_coefficients(fh, table[4], header)
    _check_points(fh, table, header)
    return ValidZkey(header=header, n_coefficients=n_coef, n_constraints=n_constraints)


def _check_coefficients(fh: IO[bytes], span: tuple[int, int], header: ZkeyHeader) -> int:
    """Every entry in range; returns the constraint count the entries imply."""
    r = get_curve(header.curve).r
    one = pow(1 << 256, 2, r)  # the coefficient 1 as stored (c·R² mod r)
    one_limbs = np.frombuffer(one.to_bytes(32, "little"), dtype="<u8")
    max_a_row = -1
    public_rows: list[np.ndarray] = []  # (row, signal) of A entries that may be the public-input rows
    for block in section_blocks(fh, span, COEF_DTYPE, "zkey", skip=4):
        if (block["m"] > 1).any():
            raise FormatError("zkey", "coefficient entry names a matrix other than A (0) or B (1)")
        if (block["c"] >= header.domain_size).any():
            raise FormatError("zkey", f"coefficient entry names a constraint beyond the domain of "
                                      f"{header.domain_size}")
        if (block["s"] >= header.n_vars).any():
            raise FormatError("zkey", f"coefficient entry names a signal beyond nVars = {header.n_vars}")
        check_reduced(np.ascontiguousarray(block["v"]), r, "a coefficient", "zkey")
        a = block[block["m"] == 0]
        if a.shape[0]:
            max_a_row = max(max_a_row, int(a["c"].max()))
        ones = a[(a["s"] <= header.n_public) & (a["v"] == one_limbs).all(axis=1)]
        public_rows.append(np.stack([ones["c"].astype(np.int64), ones["s"].astype(np.int64)], axis=1))
    n_constraints = max_a_row + 1 - (header.n_public + 1)
    _check_public_rows(public_rows, n_constraints, header)
    needed = n_constraints + header.n_public + 1
    if header.domain_size != 1 << (needed - 1).bit_length():
        raise FormatError("zkey", f"domain size {header.domain_size} does not fit {n_constraints} constraints "
                                  f"and {header.n_public} public signals "
                                  f"(expected {1 << (needed - 1).bit_length()})")
    return n_constraints


def _check_public_rows(candidates: list[np.ndarray], n_constraints: int, header: ZkeyHeader) -> None:
    """snarkjs appends to A, for each i = 0 … nPublic, row nConstraints + i = signal i."""
    if n_constraints < 0:
        raise FormatError("zkey", "coefficients lack the public-input rows snarkjs appends to A")
    pairs = np.concatenate(candidates) if candidates else np.zeros((0, 2), np.int64)
    found = set(pairs[pairs[:, 0] - pairs[:, 1] == n_constraints][:, 1].tolist())
    missing = [i for i in range(header.n_public + 1) if i not in found]
    if missing:
        raise FormatError("zkey", f"coefficients lack the public-input row of signal {missing[0]}")


def _check_points(fh: IO[bytes], table: SectionTable, header: ZkeyHeader) -> None:
    """Every coordinate of every point reduced below q (the prover's kernels assume it)."""
    c = get_curve(header.curve)
    limbs = np.dtype(("<u8", (c.fp_limbs,)))
    offset, _ = table[2]
    spans = [(offset + header.points_offset, table[2][1] - header.points_offset)]
    spans += [table[sid] for sid in POINT_SECTIONS]
    for span in spans:
        for block in section_blocks(fh, span, limbs, "zkey"):
            check_reduced(block, c.p, "a point coordinate", "zkey")


# ---------------------------------------------------------------------------------------------
# checking a registered circuit's key


def check_zkey(path: Path) -> ZkeyHeader:
    """The zkey's Groth16 header, once its whole section table is shown consistent with it
    and nothing follows its last section. Headers only: a registered key runs to hundreds of
    MB, and nothing here reads one whole."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        table = section_table(fh, size, b"zkey")
        check_ends_at_last_section(table, size, "zkey")
        missing = [sid for sid in ZKEY_SECTIONS if sid not in table]
        if missing:
            raise FormatError("zkey", f"lacks section(s) {', '.join(map(str, missing))} of a Groth16 key")
        header, _ = zkey_layout(fh, table)
    return header


# ---------------------------------------------------------------------------------------------
# writing


def _entries(m: SparseMatrix, which: int) -> np.ndarray:
    e = np.empty(m.nnz, dtype=COEF_DTYPE)
    e["m"] = which
    e["c"] = np.repeat(np.arange(m.rows, dtype=np.uint32), np.diff(m.row_ptr))
    e["s"] = m.cols
    e["v"] = m.coeffs
    return e


def write_zkey(path: str | os.PathLike[str], pk: ProvingKey, fr_mul: FrMul) -> None:
    c = get_curve(pk.curve)
    L = c.fp_limbs
    header = (
        struct.pack("<I", 8 * L) + c.p.to_bytes(8 * L, "little")
        + struct.pack("<I", 32) + c.r.to_bytes(32, "little")
        + struct.pack("<III", pk.n_vars, pk.n_public, pk.domain_size)
        + b"".join(a.astype("<u8").tobytes() for a in (pk.alpha1, pk.beta1, pk.beta2, pk.gamma2, pk.delta1, pk.delta2))
    )
    ent = np.concatenate([_entries(pk.a_matrix, 0), _entries(pk.b_matrix, 1)])
    if ent.shape[0]:
        r2 = pow(1 << 256, 2, c.r)
        ent["v"] = fr_mul(c.name, np.ascontiguousarray(ent["v"]), fr_const(r2, ent.shape[0]))
    coefs = struct.pack("<I", ent.shape[0]) + ent.tobytes()
    mpc = pk.cs_hash[:64].ljust(64, b"\0") + struct.pack("<I", 0)  # no contributions recorded

    def pts(a: np.ndarray) -> list[bytes]:
        return [np.ascontiguousarray(a).astype("<u8").tobytes()]

    write_binfile(
        path,
        b"zkey",
        1,
        [
            (1, [struct.pack("<I", 1)]),
            (2, [header]),
            (3, pts(pk.ic)),
            (4, [coefs]),
            (5, pts(pk.a_points)),
            (6, pts(pk.b1_points)),
            (7, pts(pk.b2_points)),
            (8, pts(pk.c_points)),
            (9, pts(pk.h_points)),
            (10, [mpc]),
        ],
    )


def cs_hash_of(r1cs: R1CS) -> bytes:
    """A 64-byte digest of the constraint system (our setup records it in section 10)."""
    h = hashlib.blake2b(digest_size=64)
    h.update(f"{r1cs.curve}:{r1cs.n_vars}:{r1cs.n_public}".encode())
    for m in (r1cs.a, r1cs.b, r1cs.c):
        for arr in (m.row_ptr, m.cols, m.coeffs):
            h.update(np.ascontiguousarray(arr).tobytes())
    return h.digest()
