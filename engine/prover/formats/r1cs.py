""".r1cs circom constraint systems: read whole into an R1CS, written from one, and walked a
block at a time (constraint_blocks), for checking against a witness: A·w ∘ B·w = C·w
(engine.prover.satisfied.check_file_satisfied, which evaluates the blocks with the CPU backend).

A zkey cannot answer whether a witness satisfies its circuit (it stores A and B but folds C
into its points), so that check needs the circuit's .r1cs. It runs in bounded memory whatever
the file declares: the constraints section is read about a MiB at a time (or one constraint,
when a single one is larger: its bytes are in the file), each block evaluated against the
witness memory-mapped from its file. Every count
the header declares is held against the bytes actually present before anything is sized
from it. Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from engine.prover.formats.binfile import need, read_binfile, read_section, section_table, write_binfile
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZkeyHeader, curve_with
from engine.prover.formats.limbs import check_below
from engine.prover.params.curves import CURVES, get_curve
from engine.prover.r1cs import R1CS, SparseMatrix

N8 = 32  # both curves' scalar fields fit 32 bytes; circom writes exactly that
TERM = np.dtype([("wire", "<u4"), ("value", "<u8", (4,))])  # one term of a linear combination
HEADER = struct.Struct("<IIIIQI")  # nWires, nPubOut, nPubIn, nPrvIn, nLabels, nConstraints
MIN_CONSTRAINT_BYTES = 12  # three empty linear combinations: three u32 counts
BLOCK_BYTES = 1 << 20
# Constraints evaluated at once: bounds the per-constraint bookkeeping (a few small arrays
# each) to a few MiB even for a block of tiny constraints.
MAX_ROWS = 16_384

# ---------------------------------------------------------------------------------------------
# the whole file


def read_r1cs(path: str | os.PathLike[str]) -> R1CS:
    name = Path(path).name
    _, sec = read_binfile(path, b"r1cs")
    head = bytes(need(sec, 1, name, "r1cs"))
    if len(head) < 4 + N8 + HEADER.size:
        raise FormatError("r1cs", f"{name}: header section truncated")
    (n8,) = struct.unpack_from("<I", head, 0)
    if n8 != N8:
        raise FormatError("r1cs", f"{name}: field size {n8}, expected {N8}")
    prime = int.from_bytes(head[4:36], "little")
    curve = curve_with(prime, "r")
    if curve is None:
        raise FormatError("r1cs", f"{name}: unsupported field prime {prime} "
                                  f"(supported curves: {', '.join(sorted(CURVES))})")
    n_wires, n_pub_out, n_pub_in, _n_prv_in, _n_labels, n_constraints = HEADER.unpack_from(head, 36)
    if 4 in sec or 5 in sec:
        raise FormatError("r1cs", f"{name}: custom gates (PLONK) are not supported by Groth16")
    body = need(sec, 2, name, "r1cs")
    # the walk below sizes its arrays by the declared count: held against the real bytes first
    if n_constraints * MIN_CONSTRAINT_BYTES > len(body):
        raise FormatError("r1cs", f"{name}: declares {n_constraints} constraints; its constraints section of "
                                  f"{len(body)} bytes cannot hold them")
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
        raise FormatError("r1cs", f"{name}: constraints section truncated") from None
    if pos > len(body):
        raise FormatError("r1cs", f"{name}: constraints section truncated")
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
            raise FormatError("r1cs", f"{name}: a constraint references wire {int(cols.max())} of {n_wires}")
        check_below(coeffs, curve.r, name, "r1cs")
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
# streamed: the header, then the constraints a block at a time


@dataclass(frozen=True)
class CircuitShape:
    """What the r1cs must agree with: the zkey's (or the registered circuit's) facts."""

    curve: str
    n_vars: int
    n_public: int
    n_constraints: int | None = None  # None where the caller does not know it


@dataclass(frozen=True)
class R1csHeader:
    curve: str
    n_wires: int
    n_public: int
    n_constraints: int
    constraints: tuple[int, int]  # section 2: (offset, size)


def r1cs_header(fh: IO[bytes], size: int) -> R1csHeader:
    """The header of a circom .r1cs, its constraints section shown large enough for it."""
    table = section_table(fh, size, b"r1cs")
    if 4 in table or 5 in table:
        raise FormatError("r1cs", "declares custom gates (PLONK); Groth16 proves plain R1CS only")
    raw = read_section(fh, table, 1, 4 + N8 + HEADER.size, "r1cs")
    if len(raw) < 4 + N8 + HEADER.size:
        raise FormatError("r1cs", "has a truncated header (section 1)")
    (n8,) = struct.unpack_from("<I", raw, 0)
    if n8 != N8:
        raise FormatError("r1cs", f"has {n8}-byte field elements; {N8} expected")
    curve = curve_with(int.from_bytes(raw[4:4 + N8], "little"), "r")
    if curve is None:
        raise FormatError("r1cs", "is over a field that is neither BN254's nor BLS12-381's scalar field")
    n_wires, n_out, n_in, _, _, n_constraints = HEADER.unpack_from(raw, 4 + N8)
    if 2 not in table:
        raise FormatError("r1cs", "has no constraints section (section 2)")
    span = table[2]
    if n_constraints * MIN_CONSTRAINT_BYTES > span[1]:
        raise FormatError("r1cs", f"declares {n_constraints} constraints; its constraints section of {span[1]} "
                                  "bytes cannot hold them")
    return R1csHeader(curve=curve.name, n_wires=n_wires, n_public=n_out + n_in, n_constraints=n_constraints,
                      constraints=span)


def _agrees(head: R1csHeader, circuit: CircuitShape) -> None:
    if head.curve != circuit.curve:
        raise FormatError("r1cs", f"is over {head.curve}'s scalar field; the circuit is over {circuit.curve}")
    if head.n_wires != circuit.n_vars or head.n_public != circuit.n_public:
        raise FormatError("r1cs", f"does not match the zkey: {head.n_wires} wires and {head.n_public} public "
                                  f"signals; the zkey has {circuit.n_vars} and {circuit.n_public}")
    if circuit.n_constraints is not None and head.n_constraints != circuit.n_constraints:
        raise FormatError("r1cs", f"has {head.n_constraints} constraints; the zkey was set up for "
                                  f"{circuit.n_constraints}")


def _parse(buf: bytes, limit: int) -> tuple[list[list[np.ndarray]], int]:
    """Whole constraints from the front of ``buf``, at most ``limit`` of them: per constraint
    its A, B and C terms; and the bytes they took. Stops before an incomplete constraint."""
    rows: list[list[np.ndarray]] = []
    pos, end = 0, len(buf)
    unpack = struct.Struct("<I").unpack_from
    while len(rows) < limit:
        at, combos = pos, []
        for _ in range(3):
            if at + 4 > end:
                return rows, pos
            (k,) = unpack(buf, at)
            if at + 4 + k * TERM.itemsize > end:
                return rows, pos
            combos.append(np.frombuffer(buf, dtype=TERM, count=k, offset=at + 4))
            at += 4 + k * TERM.itemsize
        rows.append(combos)
        pos = at
    return rows, pos


def _matrix(rows: list[list[np.ndarray]], which: int, n_wires: int,
            r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrix ``which`` (0 A, 1 B, 2 C) of these constraints as CSR, every entry checked."""
    terms = [row[which] for row in rows]
    counts = np.fromiter((t.shape[0] for t in terms), dtype=np.int64, count=len(terms))
    row_ptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    joined = np.concatenate(terms) if terms else np.zeros(0, TERM)
    cols = joined["wire"].astype(np.int64)
    if cols.shape[0] and int(cols.max()) >= n_wires:
        raise FormatError("r1cs", f"has a constraint on wire {int(cols.max())}; the circuit has {n_wires}")
    coeffs = np.ascontiguousarray(joined["value"], dtype=np.uint64).reshape(-1, 4)
    try:
        check_below(coeffs, r, "a coefficient", "r1cs")
    except FormatError:
        raise FormatError("r1cs", "has a coefficient not reduced below the field prime") from None
    return row_ptr, cols, coeffs


def _more(fh: IO[bytes], left: int, want: int) -> bytes:
    chunk = fh.read(min(left, want))
    if not chunk:
        raise FormatError("r1cs", "has a truncated constraints section")
    return chunk


# One block's matrices A, B and C, each CSR (row_ptr, cols, coeffs): sparse_matvec's arguments.
Block = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def constraint_blocks(r1cs: Path, circuit: CircuitShape) -> Iterator[tuple[int, Block]]:
    """The file's constraints a block at a time, every entry checked: (the index of the block's
    first constraint, its A, B and C). FormatError naming ``r1cs`` when it is malformed or not
    ``circuit``'s; the whole walk checks every constraint's structure."""
    with open(r1cs, "rb") as fh:
        head = r1cs_header(fh, r1cs.stat().st_size)
        _agrees(head, circuit)
        r = get_curve(head.curve).r
        offset, left = head.constraints
        fh.seek(offset)
        buf, done = b"", 0
        while done < head.n_constraints:
            if len(buf) < BLOCK_BYTES and left:
                chunk = _more(fh, left, BLOCK_BYTES)
                left, buf = left - len(chunk), buf + chunk
            rows, used = _parse(buf, min(head.n_constraints - done, MAX_ROWS))
            if not rows:  # one constraint larger than what is held: read on (its bytes are in the file)
                if not left:
                    raise FormatError("r1cs", "has a truncated constraints section")
                chunk = _more(fh, left, max(BLOCK_BYTES, len(buf)))
                left, buf = left - len(chunk), buf + chunk
                continue
            yield done, [_matrix(rows, m, head.n_wires, r) for m in range(3)]
            done += len(rows)
            buf = buf[used:]
        if buf or left:
            raise FormatError("r1cs", f"has {len(buf) + left} bytes after its {head.n_constraints} constraints")


def check_structure(r1cs: Path, circuit: CircuitShape) -> None:
    """FormatError naming ``r1cs`` unless every constraint in it is well formed and the header
    matches ``circuit``: what registration can check before any witness exists."""
    for _ in constraint_blocks(r1cs, circuit):
        pass


def check_r1cs(path: Path, header: ZkeyHeader) -> None:
    """The constraint system a registered zkey was set up for: same field, wires and public
    count, and every constraint well formed, so that each job's witness can be checked
    against it later (check_satisfied)."""
    check_structure(path, CircuitShape(header.curve, header.n_vars, header.n_public))
