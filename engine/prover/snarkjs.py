"""snarkjs files as one API: the binary formats (engine.prover.formats, one module per format)
and the JSON ones (engine.prover.snarkjs_json: proof.json, public.json,
verification_key.json), re-exported here for the prover's callers.

Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x).
"""

from __future__ import annotations

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
from engine.prover.formats.wtns import read_wtns, read_wtns_with_curve, write_wtns
from engine.prover.formats.zkey import (
    COEF_DTYPE,
    ZkeyConstraints,
    cs_hash_of,
    read_zkey,
    read_zkey_constraints,
    write_zkey,
)
from engine.prover.snarkjs_json import (
    proof_from_json,
    proof_to_json,
    public_to_json,
    read_proof_json,
    read_public_json,
    read_vk_json,
    vk_from_json,
    vk_to_json,
    write_proof_json,
    write_public_json,
    write_vk_json,
)

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
