"""snarkjs files as one API: the binary formats (engine.prover.formats, one module per format)
and the JSON ones (engine.prover.formats.snarkjs_json: proof.json, public.json,
verification_key.json), re-exported here for the prover's callers.

Three steps of reading or writing them take arithmetic that formats/ leaves to the protocol
(the formats import no backend): the .zkey's coefficients are stored Montgomery-scaled, so its
readers and writer are given the CPU backend's field multiply here; verification_key.json holds
e(alpha1, beta2), a pairing (engine.prover.verify). This module is why it sits beside the
protocol and not inside formats/.

Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from engine.prover.formats import snarkjs_json, zkey
from engine.prover.formats.binfile import (
    MAX_SECTIONS,
    parse_binfile,
    read_binfile,
    read_section,
    section_table,
    write_binfile,
)
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import (
    WTNS_HEADER_MAX,
    ZKEY_HEADER_MAX,
    ZKEY_SECTION_NAMES,
    WtnsHeader,
    ZkeyHeader,
    check_witness_fits,
    check_zkey_layout,
    coefficient_count,
    inspect_zkey,
    wtns_header,
    wtns_layout,
    zkey_header,
    zkey_layout,
)
from engine.prover.formats.limbs import check_below, section_blocks
from engine.prover.formats.r1cs import read_r1cs, write_r1cs
from engine.prover.formats.snarkjs_json import (
    proof_from_json,
    proof_to_json,
    public_to_json,
    read_proof_json,
    read_public_json,
    read_vk_json,
    vk_from_json,
    write_proof_json,
    write_public_json,
)
from engine.prover.formats.wtns import read_wtns, read_wtns_with_curve, write_wtns
from engine.prover.formats.zkey import COEF_DTYPE, ZkeyConstraints, cs_hash_of

if TYPE_CHECKING:
    from engine.prover.datatypes import ProvingKey, VerifyingKey



def read_zkey(path: str | os.PathLike[str]) -> ProvingKey:
    """The whole Groth16 key of a .zkey (engine.prover.formats.zkey.read_zkey)."""
    from engine.prover.backends.cpu import native

    return zkey.read_zkey(path, native.fr_mul)


def read_zkey_constraints(path: str | os.PathLike[str]) -> ZkeyConstraints:
    """A .zkey's header and A and B matrices only (engine.prover.formats.zkey.read_zkey_constraints)."""
    from engine.prover.backends.cpu import native

    return zkey.read_zkey_constraints(path, native.fr_mul)


def write_zkey(path: str | os.PathLike[str], pk: ProvingKey) -> None:
    from engine.prover.backends.cpu import native

    zkey.write_zkey(path, pk, native.fr_mul)


def vk_to_json(vk: VerifyingKey) -> dict[str, Any]:
    """verification_key.json's object, vk_alphabeta_12 computed (a pairing: the verifier's kernels)."""
    from engine.prover.verify import alphabeta_12

    return snarkjs_json.vk_to_json(vk, alphabeta_12(vk))


def write_vk_json(path: str | os.PathLike[str], vk: VerifyingKey) -> None:
    from engine.prover.verify import alphabeta_12

    snarkjs_json.write_vk_json(path, vk, alphabeta_12(vk))


__all__ = [
    "COEF_DTYPE",
    "MAX_SECTIONS",
    "WTNS_HEADER_MAX",
    "ZKEY_HEADER_MAX",
    "ZKEY_SECTION_NAMES",
    "FormatError",
    "WtnsHeader",
    "ZkeyConstraints",
    "ZkeyHeader",
    "check_below",
    "check_witness_fits",
    "check_zkey_layout",
    "coefficient_count",
    "inspect_zkey",
    "read_zkey_constraints",
    "read_section",
    "section_blocks",
    "section_table",
    "wtns_header",
    "wtns_layout",
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
