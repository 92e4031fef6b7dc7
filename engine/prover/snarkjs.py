"""snarkjs file formats, one module per concept, re-exported here as one API:

- snarkjs_headers: what a file declares (section table, zkey and wtns headers), numpy-free
- snarkjs_binfile: the iden3 binfile container (sections) and the shared field checks
- snarkjs_wtns: .wtns witnesses and .r1cs constraint systems
- snarkjs_zkey: .zkey Groth16 proving keys (read, write, inspect)
- snarkjs_json: proof.json, public.json, verification_key.json
FormatError (any malformed file) lives in engine.prover.datatypes.

Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x).
"""

from __future__ import annotations

from engine.prover.datatypes import (
    FormatError,
)
from engine.prover.snarkjs_binfile import (
    check_below,
    parse_binfile,
    read_binfile,
    section_blocks,
    write_binfile,
)
from engine.prover.snarkjs_headers import (
    MAX_SECTIONS,
    WTNS_HEADER_MAX,
    ZKEY_HEADER_MAX,
    ZKEY_SECTION_NAMES,
    WtnsHeader,
    ZkeyHeader,
    check_witness_fits,
    check_zkey_layout,
    coefficient_count,
    inspect_zkey,
    read_section,
    section_table,
    wtns_header,
    wtns_layout,
    zkey_header,
    zkey_layout,
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
from engine.prover.snarkjs_wtns import (
    read_r1cs,
    read_wtns,
    read_wtns_with_curve,
    write_r1cs,
    write_wtns,
)
from engine.prover.snarkjs_zkey import (
    COEF_DTYPE,
    ZkeyConstraints,
    cs_hash_of,
    read_zkey,
    read_zkey_constraints,
    write_zkey,
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
