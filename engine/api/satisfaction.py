"""Does the witness satisfy the circuit? A·w ∘ B·w = C·w, checked from a circom .r1cs at upload.

A zkey cannot answer this (it stores A and B but folds C into its points), so the check needs
the circuit's .r1cs: sent with a custom upload (the optional ``r1cs`` field), or registered
with a circom circuit. Without it a witness that does not satisfy the circuit is caught only
when its proof fails verification, and that failure is final (engine/finalize.py).

Bounded memory whatever the files declare: the constraints section is read a block at a
time (about a MiB, or one constraint when a single one is larger: its bytes are in the
file), each block evaluated with the prover's native sparse mat-vec, and the witness is
memory-mapped from its file, not read into the heap. Every count the header declares is
held against the bytes actually present before anything is sized from it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from engine.api.uploads import CURVES, BadCircuitFile
from engine.prover import native
from engine.prover.satisfied import first_unsatisfied as first_failing_row
from engine.prover.snarkjs import FormatError, check_below, read_section, section_table

BLOCK_BYTES = 1 << 20
N8 = 32  # both curves' scalar fields fit 32 bytes; circom writes exactly that
TERM = np.dtype([("wire", "<u4"), ("value", "<u8", (4,))])  # one term of a linear combination
HEADER = struct.Struct("<IIIIQI")  # nWires, nPubOut, nPubIn, nPrvIn, nLabels, nConstraints
MIN_CONSTRAINT_BYTES = 12  # three empty linear combinations: three u32 counts
# Constraints evaluated at once: bounds the per-constraint bookkeeping (a few small arrays
# each) to a few MiB even for a block of tiny constraints.
MAX_ROWS = 16_384


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


def read_header(fh: IO[bytes], size: int) -> R1csHeader:
    """The header of a circom .r1cs, its constraints section shown large enough for it."""
    table = section_table(fh, size, b"r1cs")
    if 4 in table or 5 in table:
        raise FormatError("declares custom gates (PLONK); Groth16 proves plain R1CS only")
    raw = read_section(fh, table, 1, 4 + N8 + HEADER.size)
    if len(raw) < 4 + N8 + HEADER.size:
        raise FormatError("has a truncated header (section 1)")
    (n8,) = struct.unpack_from("<I", raw, 0)
    if n8 != N8:
        raise FormatError(f"has {n8}-byte field elements; {N8} expected")
    prime = int.from_bytes(raw[4:4 + N8], "little")
    curve = next((name for name, (_, r) in CURVES.items() if r == prime), None)
    if curve is None:
        raise FormatError("is over a field that is neither BN254's nor BLS12-381's scalar field")
    n_wires, n_out, n_in, _, _, n_constraints = HEADER.unpack_from(raw, 4 + N8)
    if 2 not in table:
        raise FormatError("has no constraints section (section 2)")
    span = table[2]
    if n_constraints * MIN_CONSTRAINT_BYTES > span[1]:
        raise FormatError(f"declares {n_constraints} constraints; its constraints section of {span[1]} bytes "
                          "cannot hold them")
    return R1csHeader(curve=curve, n_wires=n_wires, n_public=n_out + n_in, n_constraints=n_constraints,
                      constraints=span)


def _agrees(head: R1csHeader, circuit: CircuitShape) -> None:
    if head.curve != circuit.curve:
        raise FormatError(f"is over {head.curve}'s scalar field; the circuit is over {circuit.curve}")
    if head.n_wires != circuit.n_vars or head.n_public != circuit.n_public:
        raise FormatError(f"does not match the zkey: {head.n_wires} wires and {head.n_public} public signals; "
                          f"the zkey has {circuit.n_vars} and {circuit.n_public}")
    if circuit.n_constraints is not None and head.n_constraints != circuit.n_constraints:
        raise FormatError(f"has {head.n_constraints} constraints; the zkey was set up for {circuit.n_constraints}")


def _witness(wtns: Path, n_vars: int) -> np.ndarray:
    """The witness values, memory-mapped (the upload was validated: nVars values of 32 bytes)."""
    with open(wtns, "rb") as fh:
        table = section_table(fh, wtns.stat().st_size, b"wtns")
    offset, size = table[2]
    if size != n_vars * N8:
        raise FormatError(f"holds {size // N8} values; the circuit has {n_vars} signals")
    return np.memmap(wtns, dtype=np.uint64, mode="r", offset=offset, shape=(n_vars, 4))


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
        raise FormatError(f"has a constraint on wire {int(cols.max())}; the circuit has {n_wires}")
    coeffs = np.ascontiguousarray(joined["value"], dtype=np.uint64).reshape(-1, 4)
    try:
        check_below(coeffs, r, "a coefficient")
    except FormatError:
        raise FormatError("has a coefficient not reduced below the field prime") from None
    return row_ptr, cols, coeffs


def _more(fh: IO[bytes], left: int, want: int) -> bytes:
    chunk = fh.read(min(left, want))
    if not chunk:
        raise FormatError("has a truncated constraints section")
    return chunk


def first_unsatisfied(fh: IO[bytes], head: R1csHeader, w: np.ndarray | None) -> int | None:
    """The index of the first constraint the witness fails, or None when it satisfies all.
    With no witness, the walk only checks every constraint's structure."""
    r = CURVES[head.curve][1]
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
                raise FormatError("has a truncated constraints section")
            chunk = _more(fh, left, max(BLOCK_BYTES, len(buf)))
            left, buf = left - len(chunk), buf + chunk
            continue
        matrices = [_matrix(rows, m, head.n_wires, r) for m in range(3)]
        if w is not None:
            a, b, c = (native.sparse_matvec(head.curve, *m, w) for m in matrices)
            bad = first_failing_row(head.curve, a, b, c)
            if bad is not None:
                return done + bad
        done += len(rows)
        buf = buf[used:]
    if buf or left:
        raise FormatError(f"has {len(buf) + left} bytes after its {head.n_constraints} constraints")
    return None


def check_satisfied(r1cs: Path, wtns: Path, circuit: CircuitShape, witness_field: str = "wtns") -> None:
    """BadCircuitFile naming ``r1cs`` when the r1cs is malformed or not the zkey's circuit, or
    ``witness_field`` when the witness fails a constraint."""
    try:
        w = _witness(wtns, circuit.n_vars)
    except FormatError as exc:
        raise BadCircuitFile(witness_field, str(exc)) from None
    try:
        with open(r1cs, "rb") as fh:
            head = read_header(fh, r1cs.stat().st_size)
            _agrees(head, circuit)
            bad = first_unsatisfied(fh, head, w)
    except FormatError as exc:
        raise BadCircuitFile("r1cs", str(exc)) from None
    if bad is not None:
        raise BadCircuitFile(witness_field, f"does not satisfy the circuit: constraint {bad} of the r1cs "
                                            "fails (A·w · B·w ≠ C·w)")


def check_structure(r1cs: Path, circuit: CircuitShape) -> None:
    """BadCircuitFile naming ``r1cs`` unless every constraint in it is well formed and the
    header matches ``circuit``: what registration can check before any witness exists."""
    try:
        with open(r1cs, "rb") as fh:
            head = read_header(fh, r1cs.stat().st_size)
            _agrees(head, circuit)
            first_unsatisfied(fh, head, None)
    except FormatError as exc:
        raise BadCircuitFile("r1cs", str(exc)) from None
