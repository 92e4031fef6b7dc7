"""What a .zkey or .wtns declares, checked before anything it declares is read: a Groth16 key's
header and the size of each of its sections, a witness's header and the size of its values.

Every reader of these files starts here. Kept apart from the numpy readers
(engine.prover.formats.zkey, .wtns) because the command-line prover starts here too and never
imports numpy: only the light part of the standard library (named tuples, not dataclasses).
Messages name no file (the caller adds it): they are also shown to whoever uploaded one.
Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import os
import struct
from typing import IO, NamedTuple

from engine.prover.formats.binfile import SectionTable, read_section, section_table
from engine.prover.formats.errors import FormatError
from engine.prover.params.curves import CURVES, CurveParams


def curve_with(prime: int, which: str) -> CurveParams | None:
    """The supported curve whose scalar (``which`` "r") or base ("p") field has this prime."""
    for c in CURVES.values():
        if (c.r if which == "r" else c.p) == prime:
            return c
    return None


def curve_of(prime: int, which: str, what: str, field: str) -> CurveParams:
    c = curve_with(prime, which)
    if c is None:
        kind = "scalar" if which == "r" else "base"
        raise FormatError(field, f"{what} is not the {kind} field of BN254 or BLS12-381")
    return c


# ---------------------------------------------------------------------------------------------
# .zkey (Groth16)

class ZkeyHeader(NamedTuple):
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
        raise FormatError("zkey", "Groth16 header is truncated")
    (n8q,) = struct.unpack_from("<I", h, 0)
    if n8q not in (32, 48):
        raise FormatError("zkey", f"base field element size n8q = {n8q}; expected 32 (BN254) or 48 (BLS12-381)")
    if len(h) < 4 + n8q + 4:
        raise FormatError("zkey", "Groth16 header is truncated")
    c = curve_of(int.from_bytes(h[4 : 4 + n8q], "little"), "p", "base field prime q", "zkey")
    if n8q != 8 * c.fp_limbs:
        raise FormatError("zkey", f"base field element size n8q = {n8q}; {c.name} needs {8 * c.fp_limbs}")
    pos = 4 + n8q
    (n8r,) = struct.unpack_from("<I", h, pos)
    if n8r != 32:
        raise FormatError("zkey", f"scalar field element size n8r = {n8r}; expected 32")
    if len(h) < pos + 4 + n8r + 12:
        raise FormatError("zkey", "Groth16 header is truncated")
    if int.from_bytes(h[pos + 4 : pos + 4 + n8r], "little") != c.r:
        raise FormatError("zkey", f"scalar field prime r is not {c.name}'s")
    pos += 4 + n8r
    n_vars, n_public, domain_size = struct.unpack_from("<III", h, pos)
    if n_vars < n_public + 1:
        raise FormatError("zkey", f"nVars = {n_vars} cannot hold the constant one and nPublic = {n_public} "
                                  "public signals")
    if domain_size < 1 or domain_size & (domain_size - 1):
        raise FormatError("zkey", f"domain size {domain_size} is not a power of two")
    if domain_size > 1 << c.two_adicity:
        raise FormatError("zkey", f"domain size {domain_size} exceeds {c.name}'s largest, 2^{c.two_adicity}")
    header = ZkeyHeader(curve=c.name, n8q=n8q, n8r=n8r, n_vars=n_vars, n_public=n_public,
                        domain_size=domain_size, points_offset=pos + 12)
    if len(h) != header.section_sizes(0)[2]:
        raise FormatError("zkey", f"Groth16 header holds {len(h)} bytes; expected {header.section_sizes(0)[2]}")
    return header


def check_zkey_layout(header: ZkeyHeader, sizes: dict[int, int], n_coefficients: int) -> None:
    """Every section present and exactly as large as the header says: checked before any
    array of the header's sizes is allocated, so a small file cannot claim a large key."""
    for sid, name in ZKEY_SECTION_NAMES.items():
        if sid not in sizes:
            raise FormatError("zkey", f"has no section {sid} ({name})")
    for sid, expected in header.section_sizes(n_coefficients).items():
        if sizes[sid] != expected:
            raise FormatError(
                "zkey",
                f"section {sid} ({ZKEY_SECTION_NAMES[sid]}) holds {sizes[sid]} bytes; nVars = {header.n_vars}, "
                f"nPublic = {header.n_public}, domain size = {header.domain_size} and "
                f"{n_coefficients} coefficients need {expected}")


def coefficient_count(sec4: bytes | memoryview) -> int:
    if len(sec4) < 4:
        raise FormatError("zkey", "section 4 (coefficients) is truncated")
    return int(struct.unpack_from("<I", sec4, 0)[0])


def zkey_layout(fh: IO[bytes], table: SectionTable) -> tuple[ZkeyHeader, int]:
    """The header and coefficient count of an open zkey, its section sizes checked against them."""
    header = zkey_header(read_section(fh, table, 2, ZKEY_HEADER_MAX, "zkey"))
    if 4 not in table:
        raise FormatError("zkey", "has no section 4 (coefficients)")
    offset, size = table[4]
    fh.seek(offset)
    n_coef = coefficient_count(fh.read(min(4, size)))
    check_zkey_layout(header, {sid: span[1] for sid, span in table.items()}, n_coef)
    return header, n_coef


def inspect_zkey(path: str | os.PathLike[str]) -> tuple[ZkeyHeader, int]:
    """What a zkey declares (header, coefficient count), reading only its section headers."""
    with open(path, "rb") as fh:
        return zkey_layout(fh, section_table(fh, os.fstat(fh.fileno()).st_size, b"zkey"))


def groth16_layout(fh: IO[bytes]) -> tuple[SectionTable, ZkeyHeader, int]:
    """(section table, header, coefficient count) of an open Groth16 zkey, layout checked."""
    table = section_table(fh, os.fstat(fh.fileno()).st_size, b"zkey")
    raw = read_section(fh, table, 1, 64, "zkey")
    if len(raw) < 4:
        raise FormatError("zkey", "section 1 (protocol) is truncated")
    (protocol,) = struct.unpack_from("<I", raw, 0)
    if protocol != 1:
        raise FormatError("zkey", f"protocol {protocol} is not Groth16 (1)")
    head, n_coef = zkey_layout(fh, table)
    return table, head, n_coef


# ---------------------------------------------------------------------------------------------
# .wtns

class WtnsHeader(NamedTuple):
    """A witness file's section 1: the field and how many values section 2 must hold."""

    curve: str
    n8: int
    n_values: int


def wtns_header(head: bytes | memoryview, values_bytes: int) -> WtnsHeader:
    """Section 1 parsed and checked against section 2's real size (``values_bytes``)."""
    if len(head) < 4:
        raise FormatError("wtns", "header section is truncated")
    (n8,) = struct.unpack_from("<I", head, 0)
    if n8 != 32:
        raise FormatError("wtns", f"field element size is {n8} bytes; the scalar fields here have 32")
    if len(head) != 4 + n8 + 4:
        raise FormatError("wtns", f"header section holds {len(head)} bytes; expected {4 + n8 + 4}")
    prime = int.from_bytes(head[4 : 4 + n8], "little")
    curve = curve_of(prime, "r", "the witness's prime", "wtns")
    (count,) = struct.unpack_from("<I", head, 4 + n8)
    if values_bytes != count * n8:
        raise FormatError("wtns", f"declares {count} values ({count * n8} bytes) but its values section holds "
                                  f"{values_bytes} bytes")
    return WtnsHeader(curve=curve.name, n8=n8, n_values=count)


# A witness's section 1 holds 4 + n8 + 4 bytes (40 for the scalar fields here); the bound keeps
# a corrupt header from being read whole.
WTNS_HEADER_MAX = 64


def wtns_layout(fh: IO[bytes], file_bytes: int) -> tuple[SectionTable, WtnsHeader]:
    """The section table and header of an open witness file, its values section's size checked
    against the header."""
    table = section_table(fh, file_bytes, b"wtns")
    if 2 not in table:
        raise FormatError("wtns", "has no section 2 (the values)")
    return table, wtns_header(read_section(fh, table, 1, WTNS_HEADER_MAX, "wtns"), table[2][1])


def check_witness_fits(curve: str, count: int, key_curve: str, key_vars: int) -> None:
    """Raises ValueError unless a witness of ``count`` values over ``curve`` fits the key."""
    if curve != key_curve:
        raise ValueError(f"the witness is over {curve}, the proving key over {key_curve}")
    if count != key_vars:
        raise ValueError(f"the witness has {count} values, the proving key expects {key_vars}")
