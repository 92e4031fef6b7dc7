"""The snarkjs and circom file formats the prover reads: one module per format, each reader
holding every size a file declares against the bytes it really has before anything is sized
from it, and raising FormatError naming the file at fault.

- binfile: the iden3 container under .zkey, .wtns and .r1cs (section tables, bounded); numpy-free
- limbs: sections read as rows of little-endian limbs, in bounded blocks; field range checks
- headers: what a .zkey or .wtns declares, checked against its section sizes; numpy-free, for
  the command-line prover's start-up
- zkey: Groth16 proving keys (read, write, validated in full, checked at registration)
- wtns: witnesses (read, write, validated against a key, memory-mapped)
- r1cs: circom constraint systems (read, write, and walked in bounded blocks for the
  satisfaction check, engine.prover.satisfied.check_file_satisfied)
- circom: circom's .wasm witness generator and .sym symbol table
- wasm_witness: circom's witness calculator, run from its .wasm under wasmtime
- snarkjs_json: proof.json, public.json and verification_key.json

The formats import no backend (an import-linter contract): where reading or writing takes
the field's arithmetic (a .zkey's Montgomery-scaled coefficients, verification_key.json's
pairing) the caller hands it in, and engine.prover.snarkjs is that caller for the prover's
users. A custom upload's files validated together are engine.prover.custom.

Importing the package loads only FormatError; each format is imported by name.
Layouts: docs/formats.md (snarkjs 0.7.x).
"""

from __future__ import annotations

from engine.prover.formats.errors import FormatError

__all__ = ["FormatError"]
