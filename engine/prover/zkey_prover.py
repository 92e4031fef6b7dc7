"""Groth16 straight from a snarkjs .zkey and .wtns, the way the command line proves.

The files' headers and layout are checked first (engine.prover.formats.headers), so every
allocation is what the files really hold. The zkey is then mapped, not read: its points are
the kernels' own layout (affine, Montgomery limbs, all-zero for infinity), so the kernels
read them where they lie, and give each section's pages back once they are done with it (the
coefficients after A·w and B·w, a section of points once its MSM has copied the live ones
into its plan), so the proof never holds the whole key.

The proof itself is the engine's: engine.prover.groth16's one orchestration, here over a
MappedKey and a ZkeyStatement on the CPU backend, whose launch over a mapped key runs the
kernels' Groth16 steps (kernels/groth16.h) over buffers. Only the standard library and the
compiled kernels: no numpy, so a small circuit's command is over in little more than its
proof's time.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import NamedTuple

from engine.prover import groth16
from engine.prover.backends.base import MappedKey
from engine.prover.backends.cpu import groth16_native, native_build
from engine.prover.backends.cpu.backend import CpuBackend
from engine.prover.datatypes import Proof
from engine.prover.formats.binfile import read_section
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZKEY_HEADER_MAX, check_witness_fits, groth16_layout, wtns_layout
from engine.prover.params.curves import CurveParams, get_curve


class ZkeyInputs(NamedTuple):
    """A zkey's sections and a witness, as read: little-endian bytes, the kernels' layout."""

    curve: CurveParams
    n_vars: int
    n_public: int
    domain_size: int
    n_coef: int
    header_points: bytes  # alpha1 beta1 beta2 gamma2 delta1 delta2
    ic: bytes  # section 3: the verifying key's IC points
    sections: dict[int, memoryview]  # 4 (entries, after the count), 5 to 9 (points): views of the mapped zkey
    witness: bytes

    @property
    def public_inputs(self) -> list[int]:
        return [int.from_bytes(self.witness[32 * i : 32 * i + 32], "little") for i in range(1, self.n_public + 1)]


def _pread(fd: int, span: tuple[int, int], field: str, skip: int = 0) -> bytes:
    offset, size = span
    data = os.pread(fd, size - skip, offset + skip)
    if len(data) != size - skip:
        raise FormatError(field, "is truncated")
    return data


def _views(key: mmap.mmap, table: dict[int, tuple[int, int]]) -> dict[int, memoryview]:
    """Sections 4 (after its count) to 9 of the mapped key; the layout check has bounded them
    by the file's size."""
    whole = memoryview(key)
    return {sid: whole[table[sid][0] + (4 if sid == 4 else 0) : table[sid][0] + table[sid][1]] for sid in range(4, 10)}


def read_inputs(zkey: str | os.PathLike[str], wtns: str | os.PathLike[str]) -> ZkeyInputs:
    """Both files, checked for what they declare and each other; the zkey's large sections as
    views of its read-only mapping (which lives as long as they do). Raises FormatError
    (naming the file) for a malformed file, ValueError when the witness does not fit the key."""
    zname, wname = Path(zkey).name, Path(wtns).name
    with open(zkey, "rb") as fh:
        try:
            table, head, n_coef = groth16_layout(fh)
            fd = fh.fileno()
            header_points = read_section(fh, table, 2, ZKEY_HEADER_MAX, "zkey")[head.points_offset :]
            ic = _pread(fd, table[3], "zkey")
            sections = _views(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), table)
        except FormatError as e:
            raise e.naming(zname) from None
    with open(wtns, "rb") as fh:
        try:
            table, found = wtns_layout(fh, os.fstat(fh.fileno()).st_size)
            check_witness_fits(found.curve, found.n_values, head.curve, head.n_vars)
            witness = _pread(fh.fileno(), table[2], "wtns")
        except FormatError as e:
            raise e.naming(wname) from None
    return ZkeyInputs(curve=get_curve(head.curve), n_vars=head.n_vars, n_public=head.n_public,
                      domain_size=head.domain_size, n_coef=n_coef, header_points=header_points, ic=ic,
                      sections=sections, witness=witness)


class ZkeyStatement:
    """A .wtns's witness as the orchestration's statement (groth16.Statement): checked by the
    kernels, a and b summed from the key's coefficient entries and c = a b (the zkey has no C
    matrix, so a witness that does not satisfy the circuit shows only when the proof is
    verified)."""

    def __init__(self, inputs: ZkeyInputs, threads: int) -> None:
        self.curve = inputs.curve
        self.witness = inputs.witness
        self.abc_nbytes = 3 * 32 * inputs.domain_size  # on the C heap, freed once H is made
        self.threads = threads

    def validate(self, key: MappedKey) -> None:
        groth16_native.check_witness(self.curve, self.witness, key.n_vars)

    def evaluations(self, key: MappedKey) -> tuple[object, object, object]:
        return groth16_native.evaluate(self.curve, key.entries, key.n_coef, self.witness, key.n_vars,
                                       key.domain_size, self.threads, mapped=key.mapped)


def mapped_key(inputs: ZkeyInputs) -> MappedKey:
    """The zkey's header points and sections as a MappedKey (sections 5 to 9: A, B1, B2, C, H)."""
    g1, g2 = (8 * w for w in groth16_native.point_words(inputs.curve))
    hdr = memoryview(inputs.header_points)  # alpha1 beta1 beta2 gamma2 delta1 delta2
    at = [0, g1, 2 * g1, 2 * g1 + g2, 2 * g1 + 2 * g2, 3 * g1 + 2 * g2, 3 * g1 + 3 * g2]
    alpha1, beta1, beta2, _gamma2, delta1, delta2 = (hdr[at[i] : at[i + 1]] for i in range(6))
    sec = inputs.sections
    return MappedKey(curve=inputs.curve.name, n_vars=inputs.n_vars, n_public=inputs.n_public,
                     domain_size=inputs.domain_size, alpha1=alpha1, beta1=beta1, beta2=beta2, delta1=delta1,
                     delta2=delta2, a_points=sec[5], b1_points=sec[6], b2_points=sec[7], c_points=sec[8],
                     h_points=sec[9], entries=sec[4], n_coef=inputs.n_coef, mapped=True)


def prove(inputs: ZkeyInputs, *, r: int | None = None, s: int | None = None, threads: int | None = None) -> bytes:
    """The proof (pi_a | pi_b | pi_c: affine Montgomery limbs, the zkey layout). r and s are the
    randomisers (drawn when None). Raises FormatError naming the bad entry or witness value."""
    cores = native_build.default_threads() if threads is None else threads
    try:
        return groth16.prove_raw(mapped_key(inputs), ZkeyStatement(inputs, cores), CpuBackend(cores), r=r, s=s)
    except groth16_native.RefusedInput as e:
        if e.which == "key":
            raise FormatError("zkey", f"the proving key: {e.message}") from None
        raise FormatError("wtns", f"the witness: {e.message}") from None


def verify(inputs: ZkeyInputs, proof: bytes) -> bool:
    """Whether ``proof`` verifies against the key's own verifying key and the witness's public
    inputs. Raises InvalidProof naming a point that is not a point of its group."""
    c = inputs.curve
    g1, g2 = groth16_native.point_words(c)
    words = memoryview(inputs.header_points).cast("Q")  # alpha1 beta1 beta2 gamma2 delta1 delta2
    alpha1, beta2 = words[:g1], words[2 * g1 : 2 * g1 + g2]
    gamma2, delta2 = words[2 * g1 + g2 : 2 * g1 + 2 * g2], words[3 * g1 + 2 * g2 :]
    ic = inputs.ic
    groth16_native.check_key(c, alpha1, beta2, gamma2, delta2, ic, inputs.n_public + 1)
    ab = groth16_native.alpha_beta(c, alpha1, beta2)
    return groth16_native.verify(c, proof, gamma2, delta2, ic, inputs.witness, inputs.n_public, ab,
                                 public_offset_words=4)


def proof_of(inputs: ZkeyInputs, proof: bytes) -> Proof:
    """The proof as affine Python ints (standard form), what proof.json holds."""
    return groth16_native.proof_from_bytes(inputs.curve, proof)
