"""The snarkjs and circom file formats the prover reads: one module per format, each reader
holding every size a file declares against the bytes it really has before anything is sized
from it, and raising FormatError naming the file at fault.

- binfile: the iden3 container under .zkey, .wtns and .r1cs (section tables, bounded); numpy-free
- limbs: sections read as rows of little-endian limbs, in bounded blocks; field range checks
- headers: what a .zkey or .wtns declares, checked against its section sizes; numpy-free, for
  the command-line prover's start-up
- zkey: Groth16 proving keys (read, write, validated in full, checked at registration)
- wtns: witnesses (read, write, validated against a key, memory-mapped)
- r1cs: circom constraint systems (read, write, and a streaming satisfaction check)
- circom: circom's .wasm witness generator and .sym symbol table
- custom: a custom upload's .zkey, .wtns and optional .r1cs, validated together

Importing the package loads only FormatError; each format is imported by name.
Layouts follow /work/shared/SNARKJS.md (snarkjs 0.7.x).
"""

from __future__ import annotations

from engine.prover.formats.errors import FormatError

__all__ = ["FormatError"]
