"""Groth16 proofs as the bytes other stacks exchange: A‖B‖C, each point compressed.

* BLS12-381 (the built-in kinds, Filecoin's curve): 48 + 96 + 48 = 192 bytes per proof, in the
  zcash / IETF pairing-friendly-curves encoding that bellperson, blst and arkworks' BLS12-381
  use. Big-endian x (G2: x.c1 then x.c0); the top three bits of the first byte are flags:
  0x80 compressed, 0x40 point at infinity, 0x20 y is the lexicographically larger root.
* BN254 (snarkjs circuits): 32 + 64 + 32 = 128 bytes per proof, in arkworks' compressed
  convention (ark-serialize ``serialize_compressed`` for ark-bn254): little-endian x (G2:
  x.c0 then x.c1); the top two bits of the last byte are flags: 0x80 y is the larger root
  ("negative"), 0x40 point at infinity.

"Larger" compares the root with its negation: in Fp as integers, in Fp2 by c1 first, then c0
(both conventions agree on that). A job of several partitions is their proofs concatenated in
partition order, as Filecoin's multi-partition proofs are.
"""

from __future__ import annotations

from typing import Any

from engine.prover.params.curves import get_curve
from engine.prover.snarkjs import proof_from_json

G1 = tuple[int, int]
G2 = tuple[tuple[int, int], tuple[int, int]]

# The OpenAPI document's word on the format: GET /jobs/{job_id}/proof's 200 with format=bytes.
BYTES_RESPONSE = {"responses": {200: {"content": {"application/octet-stream": {
    "schema": {"type": "string", "format": "binary", "description": (
        "With format=bytes: each partition's proof compressed as A‖B‖C, in partition order. BLS12-381 "
        "(the built-in kinds): 48+96+48 = 192 bytes per proof in the zcash/IETF compressed encoding "
        "(big-endian; flags in the top 3 bits of each point's first byte: 0x80 compressed, 0x40 infinity, "
        "0x20 larger y), as bellperson and blst read it. BN254: 32+64+32 = 128 bytes per proof in arkworks' "
        "compressed convention (ark-serialize serialize_compressed: little-endian; flags in the top 2 bits "
        "of each point's last byte: 0x80 larger y, 0x40 infinity). G2 x is c1‖c0 on BLS12-381, c0‖c1 on BN254."
    )}}}}}}


def _larger(y: int, p: int) -> bool:
    return y > (p - 1) // 2


def _larger2(y: tuple[int, int], p: int) -> bool:
    y0, y1 = y
    return _larger(y1, p) if y1 else _larger(y0, p)


def _bls_g1(pt: G1 | None, p: int) -> bytes:
    if pt is None:
        return bytes([0xC0]) + bytes(47)
    x, y = pt
    out = bytearray(x.to_bytes(48, "big"))
    out[0] |= 0x80 | (0x20 if _larger(y, p) else 0)
    return bytes(out)


def _bls_g2(pt: G2 | None, p: int) -> bytes:
    if pt is None:
        return bytes([0xC0]) + bytes(95)
    (x0, x1), y = pt
    out = bytearray(x1.to_bytes(48, "big") + x0.to_bytes(48, "big"))
    out[0] |= 0x80 | (0x20 if _larger2(y, p) else 0)
    return bytes(out)


def _bn_g1(pt: G1 | None, p: int) -> bytes:
    if pt is None:
        return bytes(31) + bytes([0x40])
    x, y = pt
    out = bytearray(x.to_bytes(32, "little"))
    out[-1] |= 0x80 if _larger(y, p) else 0
    return bytes(out)


def _bn_g2(pt: G2 | None, p: int) -> bytes:
    if pt is None:
        return bytes(63) + bytes([0x40])
    (x0, x1), y = pt
    out = bytearray(x0.to_bytes(32, "little") + x1.to_bytes(32, "little"))
    out[-1] |= 0x80 if _larger2(y, p) else 0
    return bytes(out)


def proof_bytes(proof_json: Any) -> bytes:
    """One proof (snarkjs proof.json form, as the records keep it) as compressed A‖B‖C."""
    proof = proof_from_json(proof_json)
    p = get_curve(proof.curve).p
    if proof.curve == "bls12381":
        return _bls_g1(proof.pi_a, p) + _bls_g2(proof.pi_b, p) + _bls_g1(proof.pi_c, p)
    if proof.curve == "bn128":
        return _bn_g1(proof.pi_a, p) + _bn_g2(proof.pi_b, p) + _bn_g1(proof.pi_c, p)
    raise ValueError(f"no compressed encoding for curve {proof.curve!r}")


def job_proof_bytes(partition_proofs: list[Any]) -> bytes:
    """Every partition's proof, in partition order, concatenated."""
    return b"".join(proof_bytes(proof) for proof in partition_proofs)
