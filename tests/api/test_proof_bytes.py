"""GET /jobs/<id>/proof?format=bytes: the compressed Groth16 encoding other stacks read.

The bytes are decoded by code that shares nothing with the encoder: arkworks (through
py_arkworks_bls12381, which checks the point is on the curve and in the subgroup) for
BLS12-381, and for BN254 a decoder written here from arkworks' convention on py_ecc's field
arithmetic. The decoded points must be the JSON proof's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from py_arkworks_bls12381 import G1Point, G2Point
from py_ecc import bn128

from engine.models import Partition, ProofJob
from engine.states import Curve, JobState, PartitionState, ProofKind

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
FOLDER = {Curve.BN254: "bn128", Curve.BLS12_381: "bls12381"}
P_BN = bn128.field_modulus


def fixture_proof(curve: Curve) -> dict[str, Any]:
    """A real proof of the fixture circuit, as snarkjs wrote it (and the records keep it)."""
    return json.loads((FIXTURES / FOLDER[curve] / "proof.json").read_text())


def negated_a(proof: dict[str, Any], p: int) -> dict[str, Any]:
    """The same proof with A replaced by -A: a valid point whose y is the other root."""
    x, y, z = proof["pi_a"]
    return {**proof, "pi_a": [x, str(p - int(y)), z]}


def done_job(job_id: str, curve: str, proofs: list[dict[str, Any]]) -> ProofJob:
    job = ProofJob.objects.create(job_id=job_id, kind=ProofKind.CUSTOM, curve=curve, state=JobState.DONE,
                                  num_partitions=len(proofs), proof=proofs, verified=True)
    for index, proof in enumerate(proofs):
        Partition.objects.create(job=job, index=index, state=PartitionState.DONE, proof=proof, public_inputs=[])
    return job


def g1_ints(point: list[str]) -> tuple[int, int]:
    return int(point[0]), int(point[1])


def g2_ints(point: list[list[str]]) -> tuple[int, int, int, int]:
    return int(point[0][0]), int(point[0][1]), int(point[1][0]), int(point[1][1])


# ---- BLS12-381 through arkworks ----------------------------------------------------------


def arkworks_g1(data: bytes) -> tuple[int, int]:
    xy = bytes(G1Point.from_compressed_bytes(data).to_xy_bytes_be())
    return int.from_bytes(xy[:48], "big"), int.from_bytes(xy[48:], "big")


def arkworks_g2(data: bytes) -> tuple[int, int, int, int]:
    xy = bytes(G2Point.from_compressed_bytes(data).to_xy_bytes_be())  # x.c0, x.c1, y.c0, y.c1
    x0, x1, y0, y1 = (int.from_bytes(xy[i:i + 48], "big") for i in range(0, 192, 48))
    return x0, x1, y0, y1


# ---- BN254: arkworks' compressed convention, decoded on py_ecc's fields ------------------


def _larger(y: bn128.FQ | bn128.FQ2) -> bool:
    """arkworks' "y is negative": y > -y, comparing Fp2 by c1 first."""
    if isinstance(y, bn128.FQ):
        return int(y) > (P_BN - 1) // 2
    c0, c1 = (int(c) for c in y.coeffs)
    return c1 > (P_BN - 1) // 2 if c1 else c0 > (P_BN - 1) // 2


def _sqrt_fq2(a: bn128.FQ2) -> bn128.FQ2:
    """A square root in Fp2 for p = 3 mod 4 (Adj and Rodríguez-Henríquez, algorithm 9)."""
    one = bn128.FQ2.one()
    a1 = a ** ((P_BN - 3) // 4)
    alpha = a1 * a1 * a
    x0 = a1 * a
    if alpha == -one:
        return bn128.FQ2([0, 1]) * x0
    return (one + alpha) ** ((P_BN - 1) // 2) * x0


def bn_g1(data: bytes) -> tuple[int, int]:
    assert len(data) == 32 and not data[-1] & 0x40, "not a finite point"
    x = bn128.FQ(int.from_bytes(data[:-1] + bytes([data[-1] & 0x3F]), "little"))
    y = (x ** 3 + bn128.b) ** ((P_BN + 1) // 4)
    assert y * y == x ** 3 + bn128.b, "x is not on the curve"
    if _larger(y) != bool(data[-1] & 0x80):
        y = -y
    return int(x), int(y)


def bn_g2(data: bytes) -> tuple[int, int, int, int]:
    assert len(data) == 64 and not data[-1] & 0x40, "not a finite point"
    x0 = int.from_bytes(data[:32], "little")
    x1 = int.from_bytes(data[32:-1] + bytes([data[-1] & 0x3F]), "little")
    x = bn128.FQ2([x0, x1])
    y = _sqrt_fq2(x ** 3 + bn128.b2)
    assert y * y == x ** 3 + bn128.b2, "x is not on the twist"
    if _larger(y) != bool(data[-1] & 0x80):
        y = -y
    y0, y1 = (int(c) for c in y.coeffs)
    return x0, x1, y0, y1


# ---- the endpoint ------------------------------------------------------------------------


def get_bytes(client: Client, job_id: str) -> bytes:
    response = client.get(f"/api/v1/jobs/{job_id}/proof?format=bytes")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/octet-stream"
    return response.content


# Per curve: the G1 and G2 decoders and the compressed sizes (x only, flags in the top bits).
DECODERS = {Curve.BLS12_381: (arkworks_g1, arkworks_g2, 48, 96), Curve.BN254: (bn_g1, bn_g2, 32, 64)}


@pytest.mark.parametrize("curve", [Curve.BLS12_381, Curve.BN254])
def test_a_proof_is_its_compressed_points_an_independent_decoder_reads_back_to_the_json_proof(
        operator_api: Client, curve: Curve) -> None:
    g1, g2, g1_size, g2_size = DECODERS[curve]
    proof = fixture_proof(curve)
    done_job("one", curve, [proof])
    data = get_bytes(operator_api, "one")
    assert len(data) == g1_size + g2_size + g1_size  # A‖B‖C: 192 bytes on BLS12-381, 128 on BN254
    assert g1(data[:g1_size]) == g1_ints(proof["pi_a"])
    assert g2(data[g1_size:g1_size + g2_size]) == g2_ints(proof["pi_b"])
    assert g1(data[g1_size + g2_size:]) == g1_ints(proof["pi_c"])


@pytest.mark.parametrize("curve", [Curve.BLS12_381, Curve.BN254])
def test_the_sign_flag_tells_the_two_roots_apart(operator_api: Client, curve: Curve) -> None:
    p = {Curve.BLS12_381: 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB,
         Curve.BN254: P_BN}[curve]
    proof = fixture_proof(curve)
    done_job("two-roots", curve, [proof, negated_a(proof, p)])
    data = get_bytes(operator_api, "two-roots")
    size = len(data) // 2
    decode, _, g1_size, _ = DECODERS[curve]
    first, second = data[:size], data[size:]
    assert first[g1_size:] == second[g1_size:]  # B and C are the same
    assert decode(second[:g1_size]) == g1_ints(negated_a(proof, p)["pi_a"])  # partition order, the other root


def test_bytes_wait_for_the_job_to_be_done(operator_api: Client) -> None:
    ProofJob.objects.create(job_id="not-yet", kind=ProofKind.WINNING_POST)
    response = operator_api.get("/api/v1/jobs/not-yet/proof?format=bytes")
    assert response.status_code == 409
    assert response.json()["error"] == "not_done"


def test_an_unknown_format_is_refused_by_name(operator_api: Client) -> None:
    done_job("fmt", Curve.BN254, [fixture_proof(Curve.BN254)])
    response = operator_api.get("/api/v1/jobs/fmt/proof?format=xml")
    assert response.status_code == 400
    assert "format" in response.content.decode()


def test_the_job_links_name_the_bytes_and_the_key(operator_api: Client) -> None:
    done_job("links", Curve.BN254, [fixture_proof(Curve.BN254)])
    links = operator_api.get("/api/v1/jobs/links").json()["links"]
    assert links["proof_bytes"] == "/api/v1/jobs/links/proof?format=bytes"
    assert links["verification_key"] == "/api/v1/jobs/links/verification_key.json"
