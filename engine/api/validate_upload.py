"""Full validation of a custom upload (a snarkjs Groth16 .zkey and its .wtns) before a job exists.

Everything the engine will later read is checked here, against the files' real sizes, so a
malformed upload is a 4xx naming the file and the reason rather than a job that fails (or
exhausts the host) later:

* the section table: every declared size against the bytes actually left, no duplicates;
* the zkey header: n8q / n8r, the base prime (which names the curve), the scalar prime,
  nVars ≥ nPublic + 1, a power-of-two domain no larger than the field allows, and every
  section exactly as large as those fields say (so a small file cannot declare a big key);
* the coefficients: matrix A or B, constraint below the domain, signal below nVars, value
  reduced; the public-input rows snarkjs appends to A are present; the domain is the one
  snarkjs derives from the constraint count;
* every point coordinate reduced below q;
* the witness: its field is the zkey's scalar field, it holds exactly nVars reduced values,
  and witness[0] = 1.

* with the optional .r1cs: that it is the zkey's circuit (field, wires, public signals and
  constraint count) and that the witness satisfies every constraint, A·w ∘ B·w = C·w
  (engine.api.satisfaction).

What a zkey alone cannot tell: whether the witness satisfies the circuit. The zkey stores
only the A and B matrices (the C matrix is folded into the C and IC points), so A·w and B·w
can be evaluated but A·w ∘ B·w = C·w has no right-hand side to compare with. Without an
r1cs, a witness that does not satisfy the circuit is caught when its proof fails
verification, and that failure is recorded as not retryable (engine/finalize.py).

Files are read in bounded blocks: the web process never holds more than about a MiB of an
upload, whatever it declares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from engine.api.satisfaction import CircuitShape, check_satisfied
from engine.api.uploads import BadCircuitFile
from engine.prover.curves import get_curve
from engine.prover.satisfied import starts_with_one
from engine.prover.snarkjs import (
    COEF_DTYPE,
    FormatError,
    WtnsHeader,
    ZkeyHeader,
    check_below,
    read_section,
    section_blocks,
    section_table,
    wtns_layout,
    zkey_layout,
)

POINT_SECTIONS = (3, 5, 6, 7, 8, 9)


@dataclass(frozen=True)
class CustomCircuit:
    """What a validated upload declares: the sizes its job's memory is reserved from."""

    header: ZkeyHeader
    n_constraints: int
    n_coefficients: int
    zkey_bytes: int
    wtns_bytes: int

    @property
    def curve(self) -> str:
        return self.header.curve


def validate_custom(zkey: Path, wtns: Path, r1cs: Path | None = None) -> CustomCircuit:
    """The upload's declared circuit, or BadCircuitFile naming the file at fault and why.

    With ``r1cs``, also the witness checked against every constraint of it."""
    zkey_bytes, wtns_bytes = zkey.stat().st_size, wtns.stat().st_size
    with open(zkey, "rb") as fh:
        header, n_coef, n_constraints = _as("zkey", lambda: _check_zkey(fh, zkey_bytes))
    with open(wtns, "rb") as fh:
        _as("wtns", lambda: _check_wtns(fh, wtns_bytes, header))
    if r1cs is not None:
        check_satisfied(r1cs, wtns, CircuitShape(header.curve, header.n_vars, header.n_public, n_constraints))
    return CustomCircuit(header=header, n_constraints=n_constraints, n_coefficients=n_coef,
                         zkey_bytes=zkey_bytes, wtns_bytes=wtns_bytes)


def _as[T](field: str, check: Callable[[], T]) -> T:
    try:
        return check()
    except FormatError as exc:
        raise BadCircuitFile(field, str(exc)) from None


def _reduced(values: np.ndarray, modulus: int, what: str) -> None:
    try:
        check_below(values, modulus, what)
    except FormatError:
        raise FormatError(f"{what} is not reduced below the field prime") from None


# ---- the zkey ---------------------------------------------------------------------------


def _check_zkey(fh: IO[bytes], size: int) -> tuple[ZkeyHeader, int, int]:
    table = section_table(fh, size, b"zkey")
    protocol = read_section(fh, table, 1, 4)
    if len(protocol) != 4 or int.from_bytes(protocol, "little") != 1:
        raise FormatError("is not a Groth16 key (section 1 must hold protocol 1; only Groth16 is proved here)")
    header, n_coef = zkey_layout(fh, table)
    n_constraints = _check_coefficients(fh, table[4], header)
    _check_points(fh, table, header)
    return header, n_coef, n_constraints


def _check_coefficients(fh: IO[bytes], span: tuple[int, int], header: ZkeyHeader) -> int:
    """Every entry in range; returns the constraint count the entries imply."""
    r = get_curve(header.curve).r
    one = pow(1 << 256, 2, r)  # the coefficient 1 as stored (c·R² mod r)
    one_limbs = np.frombuffer(one.to_bytes(32, "little"), dtype="<u8")
    max_a_row = -1
    public_rows: list[np.ndarray] = []  # (row, signal) of A entries that may be the public-input rows
    for block in section_blocks(fh, span, COEF_DTYPE, skip=4):
        if (block["m"] > 1).any():
            raise FormatError("coefficient entry names a matrix other than A (0) or B (1)")
        if (block["c"] >= header.domain_size).any():
            raise FormatError(f"coefficient entry names a constraint beyond the domain of {header.domain_size}")
        if (block["s"] >= header.n_vars).any():
            raise FormatError(f"coefficient entry names a signal beyond nVars = {header.n_vars}")
        _reduced(np.ascontiguousarray(block["v"]), r, "a coefficient")
        a = block[block["m"] == 0]
        if a.shape[0]:
            max_a_row = max(max_a_row, int(a["c"].max()))
        ones = a[(a["s"] <= header.n_public) & (a["v"] == one_limbs).all(axis=1)]
        public_rows.append(np.stack([ones["c"].astype(np.int64), ones["s"].astype(np.int64)], axis=1))
    n_constraints = max_a_row + 1 - (header.n_public + 1)
    _check_public_rows(public_rows, n_constraints, header)
    needed = n_constraints + header.n_public + 1
    if header.domain_size != 1 << (needed - 1).bit_length():
        raise FormatError(f"domain size {header.domain_size} does not fit {n_constraints} constraints and "
                          f"{header.n_public} public signals (expected {1 << (needed - 1).bit_length()})")
    return n_constraints


def _check_public_rows(candidates: list[np.ndarray], n_constraints: int, header: ZkeyHeader) -> None:
    """snarkjs appends to A, for each i = 0 … nPublic, row nConstraints + i = signal i."""
    if n_constraints < 0:
        raise FormatError("coefficients lack the public-input rows snarkjs appends to A")
    pairs = np.concatenate(candidates) if candidates else np.zeros((0, 2), np.int64)
    found = set(pairs[pairs[:, 0] - pairs[:, 1] == n_constraints][:, 1].tolist())
    missing = [i for i in range(header.n_public + 1) if i not in found]
    if missing:
        raise FormatError(f"coefficients lack the public-input row of signal {missing[0]}")


def _check_points(fh: IO[bytes], table: dict[int, tuple[int, int]], header: ZkeyHeader) -> None:
    """Every coordinate of every point reduced below q (the prover's kernels assume it)."""
    c = get_curve(header.curve)
    limbs = np.dtype(("<u8", (c.fp_limbs,)))
    offset, _ = table[2]
    spans = [(offset + header.points_offset, table[2][1] - header.points_offset)]
    spans += [table[sid] for sid in POINT_SECTIONS]
    for span in spans:
        for block in section_blocks(fh, span, limbs):
            _reduced(block, c.p, "a point coordinate")


# ---- the witness ------------------------------------------------------------------------


def _check_wtns(fh: IO[bytes], size: int, zkey: ZkeyHeader) -> WtnsHeader:
    table, head = wtns_layout(fh, size)
    if head.curve != zkey.curve:
        raise FormatError(f"is a witness over {get_curve(head.curve).name}'s scalar field; the zkey is over "
                          f"{get_curve(zkey.curve).name}")
    if head.n8 != zkey.n8r:
        raise FormatError(f"has {head.n8}-byte values; the zkey's n8r is {zkey.n8r}")
    if head.count != zkey.n_vars:
        raise FormatError(f"holds {head.count} values; the zkey's circuit has nVars = {zkey.n_vars}")
    first = True
    for block in section_blocks(fh, table[2], np.dtype(("<u8", (4,)))):
        _reduced(block, get_curve(zkey.curve).r, "a witness value")
        if first and not starts_with_one(block):
            raise FormatError("witness[0] must be 1 (the constant signal)")
        first = False
    return head
