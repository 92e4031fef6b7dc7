""".wtns (witness) and .r1cs (constraint system) files, read and written.

Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x); values are viewed straight into numpy.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from engine.prover.curves import get_curve
from engine.prover.datatypes import FormatError
from engine.prover.r1cs import R1CS, SparseMatrix
from engine.prover.satisfied import starts_with_one
from engine.prover.snarkjs_binfile import check_below, need, read_binfile, u64_rows, write_binfile
from engine.prover.snarkjs_headers import curve_by_prime, wtns_header

# ---------------------------------------------------------------------------------------------
# .wtns


def read_wtns(path: str | os.PathLike[str], curve: str | None = None) -> np.ndarray:
    """The witness, (n, 4) uint64 standard form; with curve, also checks the file's field."""
    found, w = read_wtns_with_curve(path)
    if curve is not None and found != get_curve(curve).name:
        raise FormatError(f"{Path(path).name}: witness is over {found}, expected {get_curve(curve).name}")
    return w


def read_wtns_with_curve(path: str | os.PathLike[str]) -> tuple[str, np.ndarray]:
    """Returns (curve name, witness (n, 4) uint64 standard form)."""
    name = Path(path).name
    _, sec = read_binfile(path, b"wtns")
    values = need(sec, 2, name)
    try:
        head = wtns_header(need(sec, 1, name), len(values))
    except FormatError as exc:
        raise FormatError(f"{name}: {exc}") from None
    curve = get_curve(head.curve)
    w = u64_rows(values, 4, head.count, f"{name} section 2")
    check_below(w, curve.r, name)
    if not starts_with_one(w):
        raise FormatError(f"{name}: witness[0] must be 1")
    return curve.name, w


def write_wtns(path: str | os.PathLike[str], curve: str, witness: np.ndarray) -> None:
    c = get_curve(curve)
    w = np.ascontiguousarray(witness, dtype=np.uint64)
    head = struct.pack("<I", 32) + c.r.to_bytes(32, "little") + struct.pack("<I", w.shape[0])
    write_binfile(path, b"wtns", 2, [(1, [head]), (2, [w.astype("<u8").tobytes()])])


# ---------------------------------------------------------------------------------------------
# .r1cs


def read_r1cs(path: str | os.PathLike[str]) -> R1CS:
    name = Path(path).name
    _, sec = read_binfile(path, b"r1cs")
    head = bytes(need(sec, 1, name))
    (n8,) = struct.unpack_from("<I", head, 0)
    if n8 != 32:
        raise FormatError(f"{name}: field size {n8}, expected 32")
    curve = curve_by_prime(int.from_bytes(head[4:36], "little"), "r", name)
    n_wires, n_pub_out, n_pub_in, _n_prv_in, _n_labels, n_constraints = struct.unpack_from("<IIIIQI", head, 36)
    if 4 in sec or 5 in sec:
        raise FormatError(f"{name}: custom gates (PLONK) are not supported by Groth16")
    body = need(sec, 2, name)
    raw = np.frombuffer(body, dtype=np.uint8)
    term = 4 + n8
    # Walk the variable-length layout once to find each linear combination's start; the
    # terms themselves are then gathered with numpy (no per-term Python work).
    starts = np.empty(3 * n_constraints, dtype=np.int64)
    counts = np.empty(3 * n_constraints, dtype=np.int64)
    pos = 0
    unpack = struct.Struct("<I").unpack_from
    try:
        for i in range(3 * n_constraints):
            (k,) = unpack(body, pos)
            starts[i] = pos + 4
            counts[i] = k
            pos += 4 + k * term
    except struct.error:
        raise FormatError(f"{name}: constraints section truncated") from None
    if pos > len(body):
        raise FormatError(f"{name}: constraints section truncated")
    mats = []
    for which in range(3):
        st, ct = starts[which::3], counts[which::3]
        row_ptr = np.zeros(n_constraints + 1, dtype=np.int64)
        np.cumsum(ct, out=row_ptr[1:])
        nnz = int(row_ptr[-1])
        within = np.arange(nnz, dtype=np.int64) - np.repeat(row_ptr[:-1], ct)
        offs = np.repeat(st, ct) + within * term
        cols = (raw[offs[:, None] + np.arange(4)].copy().view("<u4").reshape(-1)).astype(np.int64)
        coeffs = raw[offs[:, None] + 4 + np.arange(32)].copy().view("<u8").reshape(nnz, 4).astype(np.uint64)
        if nnz and cols.max() >= n_wires:
            raise FormatError(f"{name}: a constraint references wire {int(cols.max())} of {n_wires}")
        check_below(coeffs, curve.r, name)
        mats.append(SparseMatrix(row_ptr=row_ptr, cols=cols, coeffs=coeffs))
    return R1CS(curve=curve.name, n_vars=n_wires, n_public=n_pub_out + n_pub_in, a=mats[0], b=mats[1], c=mats[2])


def write_r1cs(path: str | os.PathLike[str], r1cs: R1CS) -> None:
    """All public signals are written as public inputs (no outputs); labels are the wire ids."""
    c = get_curve(r1cs.curve)
    n = r1cs.n_constraints
    head = c.r.to_bytes(32, "little")
    head = struct.pack("<I", 32) + head + struct.pack(
        "<IIIIQI", r1cs.n_vars, 0, r1cs.n_public, r1cs.n_vars - 1 - r1cs.n_public, r1cs.n_vars, n
    )
    term_dt = np.dtype([("w", "<u4"), ("v", "<u8", (4,))])
    blobs = []
    for m in (r1cs.a, r1cs.b, r1cs.c):
        t = np.empty(m.nnz, dtype=term_dt)
        t["w"] = m.cols
        t["v"] = m.coeffs
        blobs.append((t.tobytes(), m.row_ptr))
    parts: list[bytes] = []
    pack = struct.Struct("<I").pack
    for i in range(n):
        for blob, rp in blobs:
            lo, hi = int(rp[i]), int(rp[i + 1])
            parts.append(pack(hi - lo))
            parts.append(blob[lo * 36 : hi * 36])
    labels = np.arange(r1cs.n_vars, dtype="<u8").tobytes()
    write_binfile(path, b"r1cs", 1, [(1, [head]), (2, parts), (3, [labels])])
