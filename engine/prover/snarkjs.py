"""snarkjs file formats: the iden3 binfile container, .r1cs, .zkey (Groth16), .wtns, and the
JSON files (proof.json, public.json, verification_key.json).

Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x). Big sections are viewed straight into
numpy arrays: zkey points are already affine Montgomery limbs, which is our in-memory layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from engine.prover.curves import CURVES, CurveParams, get_curve
from engine.prover.keys import ProvingKey, VerifyingKey
from engine.prover.r1cs import R1CS, SparseMatrix

if TYPE_CHECKING:
    from engine.prover.groth16 import Proof


class FormatError(ValueError):
    """A snarkjs file that is truncated, of the wrong kind, or inconsistent."""


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


def _need(sections: dict[int, memoryview], sid: int, name: str) -> memoryview:
    if sid not in sections:
        raise FormatError(f"{name}: section {sid} missing")
    return sections[sid]


def _curve_by_prime(prime: int, which: str, name: str) -> CurveParams:
    for c in CURVES.values():
        if (c.r if which == "r" else c.p) == prime:
            return c
    raise FormatError(f"{name}: unsupported field prime {prime} (supported curves: {', '.join(sorted(CURVES))})")


def _curve_of(prime: int, which: str, what: str) -> CurveParams:
    for c in CURVES.values():
        if (c.r if which == "r" else c.p) == prime:
            return c
    field = "scalar" if which == "r" else "base"
    raise FormatError(f"{what} is not the {field} field of BN254 or BLS12-381")


def _u64_rows(buf: memoryview | bytes, width_limbs: int, count: int, name: str) -> np.ndarray:
    need = count * width_limbs * 8
    if len(buf) < need:
        raise FormatError(f"{name}: expected {need} bytes, found {len(buf)}")
    # copy: the key outlives the file buffer, and kernels want owned, aligned memory
    return np.frombuffer(buf, dtype="<u8", count=count * width_limbs).astype(np.uint64).reshape(count, width_limbs)


def _fr_const(value: int, n: int) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------
# .wtns


def read_wtns(path: str | os.PathLike[str], curve: str | None = None) -> np.ndarray:
    """The witness, (n, 4) uint64 standard form; with curve, also checks the file's field."""
    found, w = read_wtns_with_curve(path)
    if curve is not None and found != get_curve(curve).name:
        raise FormatError(f"{Path(path).name}: witness is over {found}, expected {get_curve(curve).name}")
    return w


@dataclass(frozen=True)
class WtnsHeader:
    """A witness file's section 1: the field and how many values section 2 must hold."""

    curve: str
    n8: int
    count: int


def wtns_header(head: bytes | memoryview, values_bytes: int) -> WtnsHeader:
    """Section 1 parsed and checked against section 2's real size (``values_bytes``)."""
    if len(head) < 4:
        raise FormatError("header section is truncated")
    (n8,) = struct.unpack_from("<I", head, 0)
    if n8 != 32:
        raise FormatError(f"field element size is {n8} bytes; the scalar fields here have 32")
    if len(head) != 4 + n8 + 4:
        raise FormatError(f"header section holds {len(head)} bytes; expected {4 + n8 + 4}")
    prime = int.from_bytes(head[4 : 4 + n8], "little")
    curve = _curve_of(prime, "r", "the witness's prime")
    (count,) = struct.unpack_from("<I", head, 4 + n8)
    if values_bytes != count * n8:
        raise FormatError(f"declares {count} values ({count * n8} bytes) but its values section holds "
                          f"{values_bytes} bytes")
    return WtnsHeader(curve=curve.name, n8=n8, count=count)


def read_wtns_with_curve(path: str | os.PathLike[str]) -> tuple[str, np.ndarray]:
    """Returns (curve name, witness (n, 4) uint64 standard form)."""
    name = Path(path).name
    _, sec = read_binfile(path, b"wtns")
    values = _need(sec, 2, name)
    try:
        head = wtns_header(_need(sec, 1, name), len(values))
    except FormatError as exc:
        raise FormatError(f"{name}: {exc}") from None
    curve = get_curve(head.curve)
    w = _u64_rows(values, 4, head.count, f"{name} section 2")
    check_below(w, curve.r, name)
    if head.count == 0 or not (w[0, 0] == 1 and not w[0, 1:].any()):
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
    head = bytes(_need(sec, 1, name))
    (n8,) = struct.unpack_from("<I", head, 0)
    if n8 != 32:
        raise FormatError(f"{name}: field size {n8}, expected 32")
    curve = _curve_by_prime(int.from_bytes(head[4:36], "little"), "r", name)
    n_wires, n_pub_out, n_pub_in, _n_prv_in, _n_labels, n_constraints = struct.unpack_from("<IIIIQI", head, 36)
    if 4 in sec or 5 in sec:
        raise FormatError(f"{name}: custom gates (PLONK) are not supported by Groth16")
    body = _need(sec, 2, name)
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


# ---------------------------------------------------------------------------------------------
# .zkey (Groth16)

# One section 4 entry: matrix (0 = A, 1 = B), constraint, signal, value (c·R² mod r).
COEF_DTYPE = np.dtype([("m", "<u4"), ("c", "<u4"), ("s", "<u4"), ("v", "<u8", (4,))])


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


@dataclass(frozen=True)
class ZkeyHeader:
    """A Groth16 zkey's section 2 fields: everything its other sections' sizes follow from."""

    curve: str
    n8q: int
    n8r: int
    n_vars: int
    n_public: int
    domain_size: int
    points_offset: int  # where alpha1 … delta2 start within section 2

    @property
    def g1_bytes(self) -> int:
        return 2 * self.n8q

    @property
    def g2_bytes(self) -> int:
        return 4 * self.n8q

    def section_sizes(self, n_coefficients: int) -> dict[int, int]:
        """The exact byte size of every section whose size the header fixes (10 is free)."""
        g1, g2 = self.g1_bytes, self.g2_bytes
        return {
            1: 4,
            2: self.points_offset + 3 * g1 + 3 * g2,
            3: (self.n_public + 1) * g1,
            4: 4 + n_coefficients * (12 + self.n8r),
            5: self.n_vars * g1,
            6: self.n_vars * g1,
            7: self.n_vars * g2,
            8: (self.n_vars - self.n_public - 1) * g1,
            9: self.domain_size * g1,
        }


ZKEY_SECTION_NAMES = {1: "protocol", 2: "Groth16 header", 3: "IC", 4: "coefficients", 5: "A points",
                      6: "B1 points", 7: "B2 points", 8: "C points", 9: "H points", 10: "contributions"}
# The largest section 2 of a supported curve (BLS12-381: 100 bytes of fields, 864 of points).
ZKEY_HEADER_MAX = 1024


def zkey_header(h: bytes | memoryview) -> ZkeyHeader:
    """Section 2 parsed and checked field by field; raises FormatError naming the field."""
    if len(h) < 4:
        raise FormatError("Groth16 header is truncated")
    (n8q,) = struct.unpack_from("<I", h, 0)
    if n8q not in (32, 48):
        raise FormatError(f"base field element size n8q = {n8q}; expected 32 (BN254) or 48 (BLS12-381)")
    if len(h) < 4 + n8q + 4:
        raise FormatError("Groth16 header is truncated")
    c = _curve_of(int.from_bytes(h[4 : 4 + n8q], "little"), "p", "base field prime q")
    if n8q != 8 * c.fp_limbs:
        raise FormatError(f"base field element size n8q = {n8q}; {c.name} needs {8 * c.fp_limbs}")
    pos = 4 + n8q
    (n8r,) = struct.unpack_from("<I", h, pos)
    if n8r != 32:
        raise FormatError(f"scalar field element size n8r = {n8r}; expected 32")
    if len(h) < pos + 4 + n8r + 12:
        raise FormatError("Groth16 header is truncated")
    if int.from_bytes(h[pos + 4 : pos + 4 + n8r], "little") != c.r:
        raise FormatError(f"scalar field prime r is not {c.name}'s")
    pos += 4 + n8r
    n_vars, n_public, domain_size = struct.unpack_from("<III", h, pos)
    if n_vars < n_public + 1:
        raise FormatError(f"nVars = {n_vars} cannot hold the constant one and nPublic = {n_public} public signals")
    if domain_size < 1 or domain_size & (domain_size - 1):
        raise FormatError(f"domain size {domain_size} is not a power of two")
    if domain_size > 1 << c.two_adicity:
        raise FormatError(f"domain size {domain_size} exceeds {c.name}'s largest, 2^{c.two_adicity}")
    header = ZkeyHeader(curve=c.name, n8q=n8q, n8r=n8r, n_vars=n_vars, n_public=n_public,
                        domain_size=domain_size, points_offset=pos + 12)
    if len(h) != header.section_sizes(0)[2]:
        raise FormatError(f"Groth16 header holds {len(h)} bytes; expected {header.section_sizes(0)[2]}")
    return header


def check_zkey_layout(header: ZkeyHeader, sizes: dict[int, int], n_coefficients: int) -> None:
    """Every section present and exactly as large as the header says: checked before any
    array of the header's sizes is allocated, so a small file cannot claim a large key."""
    for sid, name in ZKEY_SECTION_NAMES.items():
        if sid not in sizes:
            raise FormatError(f"has no section {sid} ({name})")
    for sid, expected in header.section_sizes(n_coefficients).items():
        if sizes[sid] != expected:
            raise FormatError(
                f"section {sid} ({ZKEY_SECTION_NAMES[sid]}) holds {sizes[sid]} bytes; nVars = {header.n_vars}, "
                f"nPublic = {header.n_public}, domain size = {header.domain_size} and "
                f"{n_coefficients} coefficients need {expected}")


def coefficient_count(sec4: bytes | memoryview) -> int:
    if len(sec4) < 4:
        raise FormatError("section 4 (coefficients) is truncated")
    return int(struct.unpack_from("<I", sec4, 0)[0])


def zkey_layout(fh: IO[bytes], table: dict[int, tuple[int, int]]) -> tuple[ZkeyHeader, int]:
    """The header and coefficient count of an open zkey, its section sizes checked against them."""
    header = zkey_header(read_section(fh, table, 2, ZKEY_HEADER_MAX))
    if 4 not in table:
        raise FormatError("has no section 4 (coefficients)")
    offset, size = table[4]
    fh.seek(offset)
    n_coef = coefficient_count(fh.read(min(4, size)))
    check_zkey_layout(header, {sid: span[1] for sid, span in table.items()}, n_coef)
    return header, n_coef


def inspect_zkey(path: str | os.PathLike[str]) -> tuple[ZkeyHeader, int]:
    """What a zkey declares (header, coefficient count), reading only its section headers."""
    with open(path, "rb") as fh:
        return zkey_layout(fh, section_table(fh, os.fstat(fh.fileno()).st_size, b"zkey"))


def read_zkey(path: str | os.PathLike[str]) -> ProvingKey:
    from engine.prover import native

    name = Path(path).name
    _, sec = read_binfile(path, b"zkey")
    try:
        (protocol,) = struct.unpack_from("<I", _need(sec, 1, name), 0)
        if protocol != 1:
            raise FormatError(f"protocol {protocol} is not Groth16 (1)")
        head = zkey_header(_need(sec, 2, name))
        n_coef = coefficient_count(_need(sec, 4, name))
        check_zkey_layout(head, {sid: len(v) for sid, v in sec.items()}, n_coef)
    except (FormatError, struct.error) as exc:
        raise FormatError(f"{name}: {exc}") from None
    c = get_curve(head.curve)
    L = c.fp_limbs
    n_vars, n_public, domain_size = head.n_vars, head.n_public, head.domain_size
    pts = _u64_rows(_need(sec, 2, name)[head.points_offset :], 1, 3 * 2 * L + 3 * 4 * L,
                    f"{name} header points").reshape(-1)
    o = 0
    hdr: list[np.ndarray] = []
    for width in (2 * L, 2 * L, 4 * L, 4 * L, 2 * L, 4 * L):  # alpha1 beta1 beta2 gamma2 delta1 delta2
        hdr.append(pts[o : o + width].copy())
        o += width
    coef_sec = _need(sec, 4, name)
    ent = np.frombuffer(coef_sec, dtype=COEF_DTYPE, count=n_coef, offset=4)
    mats = ent["m"]
    if n_coef and (mats.max() > 1 or ent["c"].max() >= domain_size or ent["s"].max() >= n_vars):
        raise FormatError(f"{name}: coefficient entry out of range")
    vals = np.ascontiguousarray(ent["v"], dtype=np.uint64)
    check_below(vals, c.r, f"{name} coefficients")
    # stored as coef·R² mod r (snarkjs multiplies by R² so its Montgomery product with a plain
    # witness value lands in Montgomery form); undo it once here, vectorised
    rinv2 = pow(1 << 256, -2, c.r)
    vals = native.fr_mul(c.name, vals, _fr_const(rinv2, n_coef)) if n_coef else vals
    a_sel, b_sel = mats == 0, mats == 1
    rows = ent["c"].astype(np.int64)
    cols = ent["s"].astype(np.int64)
    a_m = _csr_from_entries(rows[a_sel], cols[a_sel], vals[a_sel], domain_size)
    b_m = _csr_from_entries(rows[b_sel], cols[b_sel], vals[b_sel], domain_size)
    # the public-input rows (signal i at row n_constraints + i) are A's last non-empty rows
    a_rows = rows[a_sel]
    n_constraints = int(a_rows.max()) + 1 - (n_public + 1) if a_rows.size else 0
    n_constraints = max(n_constraints, 0)
    csh = _need(sec, 10, name)
    return ProvingKey(
        curve=c.name,
        n_vars=n_vars,
        n_public=n_public,
        domain_size=domain_size,
        n_constraints=n_constraints,
        alpha1=hdr[0],
        beta1=hdr[1],
        beta2=hdr[2],
        gamma2=hdr[3],
        delta1=hdr[4],
        delta2=hdr[5],
        ic=_u64_rows(_need(sec, 3, name), 2 * L, n_public + 1, f"{name} section 3 (IC)"),
        a_points=_u64_rows(_need(sec, 5, name), 2 * L, n_vars, f"{name} section 5 (A)"),
        b1_points=_u64_rows(_need(sec, 6, name), 2 * L, n_vars, f"{name} section 6 (B1)"),
        b2_points=_u64_rows(_need(sec, 7, name), 4 * L, n_vars, f"{name} section 7 (B2)"),
        c_points=_u64_rows(_need(sec, 8, name), 2 * L, n_vars - n_public - 1, f"{name} section 8 (C)"),
        h_points=_u64_rows(_need(sec, 9, name), 2 * L, domain_size, f"{name} section 9 (H)"),
        a_matrix=a_m,
        b_matrix=b_m,
        cs_hash=bytes(csh[:64]),
    )


def _entries(m: SparseMatrix, which: int) -> np.ndarray:
    e = np.empty(m.nnz, dtype=COEF_DTYPE)
    e["m"] = which
    e["c"] = np.repeat(np.arange(m.rows, dtype=np.uint32), np.diff(m.row_ptr))
    e["s"] = m.cols
    e["v"] = m.coeffs
    return e


def write_zkey(path: str | os.PathLike[str], pk: ProvingKey) -> None:
    from engine.prover import native

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
        ent["v"] = native.fr_mul(c.name, np.ascontiguousarray(ent["v"]), _fr_const(r2, ent.shape[0]))
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


# ---------------------------------------------------------------------------------------------
# JSON


def _g1_json(pt: tuple[int, int] | None) -> list[str]:
    return ["0", "1", "0"] if pt is None else [str(pt[0]), str(pt[1]), "1"]


def _g2_json(pt: tuple[tuple[int, int], tuple[int, int]] | None) -> list[list[str]]:
    if pt is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = pt
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise FormatError(f"{what}: expected a decimal string, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise FormatError(f"{what}: {v!r} is not a decimal integer") from None


def _g1_from_json(v: Any, what: str) -> tuple[int, int] | None:
    if not isinstance(v, list) or len(v) not in (2, 3):
        raise FormatError(f"{what}: expected [x, y, z]")
    x, y = _int(v[0], what), _int(v[1], what)
    z = _int(v[2], what) if len(v) == 3 else 1
    if z == 0:
        return None
    if z != 1:
        raise FormatError(f"{what}: only affine points (z = 1) are accepted")
    return (x, y)


def _g2_from_json(v: Any, what: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    if not isinstance(v, list) or len(v) not in (2, 3) or not all(isinstance(e, list) and len(e) == 2 for e in v):
        raise FormatError(f"{what}: expected [[x0, x1], [y0, y1], [z0, z1]]")
    x = (_int(v[0][0], what), _int(v[0][1], what))
    y = (_int(v[1][0], what), _int(v[1][1], what))
    z = (_int(v[2][0], what), _int(v[2][1], what)) if len(v) == 3 else (1, 0)
    if z == (0, 0):
        return None
    if z != (1, 0):
        raise FormatError(f"{what}: only affine points (z = 1) are accepted")
    return (x, y)


def proof_to_json(proof: Proof) -> dict[str, Any]:
    return {
        "pi_a": _g1_json(proof.pi_a),
        "pi_b": _g2_json(proof.pi_b),
        "pi_c": _g1_json(proof.pi_c),
        "protocol": "groth16",
        "curve": proof.curve,
    }


def proof_from_json(obj: Any) -> Proof:
    from engine.prover.groth16 import Proof

    if not isinstance(obj, dict):
        raise FormatError("proof: expected a JSON object")
    if obj.get("protocol", "groth16") != "groth16":
        raise FormatError(f"proof: protocol {obj.get('protocol')!r} is not groth16")
    curve = obj.get("curve")
    if curve not in CURVES:
        raise FormatError(f"proof: unknown curve {curve!r}")
    return Proof(
        curve=curve,
        pi_a=_g1_from_json(obj.get("pi_a"), "proof pi_a"),
        pi_b=_g2_from_json(obj.get("pi_b"), "proof pi_b"),
        pi_c=_g1_from_json(obj.get("pi_c"), "proof pi_c"),
    )


def _dump(path: str | os.PathLike[str], obj: Any) -> None:
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def write_proof_json(path: str | os.PathLike[str], proof: Proof) -> None:
    _dump(path, proof_to_json(proof))


def read_proof_json(path: str | os.PathLike[str]) -> Proof:
    return proof_from_json(_load(path))


def public_to_json(public_inputs: Sequence[int] | np.ndarray) -> list[str]:
    if isinstance(public_inputs, np.ndarray):
        from engine.prover.curves import limbs_to_ints

        public_inputs = limbs_to_ints(public_inputs) if public_inputs.size else []
    return [str(int(v)) for v in public_inputs]


def write_public_json(path: str | os.PathLike[str], public_inputs: Sequence[int] | np.ndarray) -> None:
    _dump(path, public_to_json(public_inputs))


def read_public_json(path: str | os.PathLike[str]) -> list[int]:
    obj = _load(path)
    if not isinstance(obj, list):
        raise FormatError(f"{path}: expected a JSON list of decimal strings")
    return [_int(v, f"{path} entry {i}") for i, v in enumerate(obj)]


def _load(path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}: not valid JSON ({e})") from None


def vk_to_json(vk: VerifyingKey) -> dict[str, Any]:
    from engine.prover.verify import alphabeta_12

    return {
        "protocol": "groth16",
        "curve": vk.curve,
        "nPublic": vk.n_public,
        "vk_alpha_1": _g1_json(vk.alpha1),
        "vk_beta_2": _g2_json(vk.beta2),
        "vk_gamma_2": _g2_json(vk.gamma2),
        "vk_delta_2": _g2_json(vk.delta2),
        "vk_alphabeta_12": [[[str(x) for x in fp2] for fp2 in fp6] for fp6 in alphabeta_12(vk)],
        "IC": [_g1_json(p) for p in vk.ic],
    }


def write_vk_json(path: str | os.PathLike[str], vk: VerifyingKey) -> None:
    _dump(path, vk_to_json(vk))


def vk_from_json(obj: Any) -> VerifyingKey:
    if not isinstance(obj, dict) or obj.get("protocol") != "groth16":
        raise FormatError("verification key: expected a groth16 verification_key.json object")
    curve = obj.get("curve")
    if curve not in CURVES:
        raise FormatError(f"verification key: unknown curve {curve!r}")
    ic = obj.get("IC")
    if not isinstance(ic, list):
        raise FormatError("verification key: IC missing")
    n_public = _int(obj.get("nPublic"), "verification key nPublic")
    if len(ic) != n_public + 1:
        raise FormatError(f"verification key: {len(ic)} IC points for nPublic = {n_public}")
    pts = {k: _g2_from_json(obj.get(k), f"verification key {k}") for k in ("vk_beta_2", "vk_gamma_2", "vk_delta_2")}
    alpha = _g1_from_json(obj.get("vk_alpha_1"), "verification key vk_alpha_1")
    if alpha is None or any(v is None for v in pts.values()):
        raise FormatError("verification key: alpha/beta/gamma/delta must not be the point at infinity")
    return VerifyingKey(
        curve=curve,
        n_public=n_public,
        alpha1=alpha,
        beta2=pts["vk_beta_2"],  # type: ignore[arg-type]
        gamma2=pts["vk_gamma_2"],  # type: ignore[arg-type]
        delta2=pts["vk_delta_2"],  # type: ignore[arg-type]
        ic=tuple(_g1_from_json(p, f"verification key IC[{i}]") for i, p in enumerate(ic)),
    )


def read_vk_json(path: str | os.PathLike[str]) -> VerifyingKey:
    return vk_from_json(_load(path))


__all__ = [
    "COEF_DTYPE",
    "MAX_SECTIONS",
    "ZKEY_HEADER_MAX",
    "ZKEY_SECTION_NAMES",
    "FormatError",
    "WtnsHeader",
    "ZkeyHeader",
    "check_below",
    "check_zkey_layout",
    "coefficient_count",
    "inspect_zkey",
    "read_section",
    "section_blocks",
    "section_table",
    "wtns_header",
    "zkey_header",
    "zkey_layout",
    "cs_hash_of",
    "parse_binfile",
    "proof_from_json",
    "proof_to_json",
    "public_to_json",
    "read_binfile",
    "read_proof_json",
    "read_public_json",
    "read_r1cs",
    "read_vk_json",
    "read_wtns",
    "read_wtns_with_curve",
    "read_zkey",
    "vk_from_json",
    "vk_to_json",
    "write_binfile",
    "write_proof_json",
    "write_public_json",
    "write_r1cs",
    "write_vk_json",
    "write_wtns",
    "write_zkey",
]
