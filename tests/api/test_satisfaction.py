"""A witness that does not satisfy its circuit is refused at upload when the circuit's .r1cs is
known: sent with a custom upload, or registered with a circom circuit. A 400 naming the
witness, before any job exists; a malformed r1cs is a 400 naming ``r1cs``."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.api.uploads import CURVES
from engine.models import ProofJob
from tests.api.test_upload_validation import WTNS, WVALUES, ZKEY, fixture, patched, payload
from tests.oracle import snarkjs as oracle
from tests.oracle.circom import CircomBuild, circom_product  # noqa: F401  the session fixture

# What is refused, and why, is the subject; the rows written are those of any upload.
pytestmark = [pytest.mark.django_db, pytest.mark.database_agnostic]

R1CS = fixture("circuit.r1cs")
CONSTRAINTS = payload(R1CS, 2)  # the first constraint: A's term count, its terms, then B, C


def unsatisfying(wtns: bytes = WTNS) -> bytes:
    """The witness with its last (private) value off by one: well formed, still reduced."""
    at = WVALUES + 203 * 32
    prime = int.from_bytes(wtns[payload(wtns, 1) + 4:payload(wtns, 1) + 36], "little")
    value = (int.from_bytes(wtns[at:at + 32], "little") + 1) % prime
    return patched(wtns, at, value.to_bytes(32, "little"))


def custom(api: Client, wtns: bytes = WTNS, r1cs: bytes | None = R1CS, zkey: bytes = ZKEY) -> Any:
    body = {"job_id": "mine-1", "zkey": SimpleUploadedFile("c.zkey", zkey), "wtns": SimpleUploadedFile("c.wtns", wtns)}
    if r1cs is not None:
        body["r1cs"] = SimpleUploadedFile("c.r1cs", r1cs)
    return api.post("/api/v1/jobs/custom", body)


def refused(response: Any, field: str) -> str:
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field, response.json()
    assert not ProofJob.objects.exists()
    return str(response.json()["detail"])


@pytest.mark.parametrize("folder", ["bn128", "bls12381"])
def test_an_unsatisfying_witness_with_its_r1cs_is_refused_naming_wtns_and_the_constraint(
        api: Client, uploads: Path, folder: str) -> None:
    files = {"zkey": fixture("circuit.zkey", folder), "r1cs": fixture("circuit.r1cs", folder)}
    detail = refused(custom(api, wtns=unsatisfying(fixture("witness.wtns", folder)), **files), "wtns")
    # 198: where the prover's own in-memory check (read_r1cs, assignment_from_r1cs) fails too.
    assert "does not satisfy the circuit" in detail and "constraint 198" in detail
    assert custom(api, wtns=fixture("witness.wtns", folder), **files).status_code == 201  # snarkjs's own witness


def test_the_r1cs_of_another_curve_is_refused_naming_r1cs(api: Client, uploads: Path) -> None:
    assert "scalar field" in refused(custom(api, r1cs=fixture("circuit.r1cs", "bls12381")), "r1cs")


def test_an_r1cs_with_another_constraint_count_is_refused(api: Client, uploads: Path) -> None:
    n_constraints_at = payload(R1CS, 1) + 4 + 32 + 4 * 4 + 8
    assert "constraints" in refused(custom(api, r1cs=patched(R1CS, n_constraints_at, struct.pack("<I", 199))),
                                    "r1cs")


def test_an_r1cs_declaring_4_billion_constraints_in_a_small_file_is_refused(api: Client, uploads: Path) -> None:
    n_constraints_at = payload(R1CS, 1) + 4 + 32 + 4 * 4 + 8
    huge = patched(R1CS, n_constraints_at, struct.pack("<I", 0xFFFFFFFF))
    assert "cannot hold them" in refused(custom(api, r1cs=huge), "r1cs")


def test_a_linear_combination_declaring_4_billion_terms_is_refused_as_truncated(api: Client, uploads: Path) -> None:
    huge = patched(R1CS, CONSTRAINTS, struct.pack("<I", 0xFFFFFFFF))
    assert "truncated" in refused(custom(api, r1cs=huge), "r1cs")


def test_a_term_on_a_wire_past_the_circuit_is_refused(api: Client, uploads: Path) -> None:
    (count,) = struct.unpack_from("<I", R1CS, CONSTRAINTS)
    assert count > 0
    assert "wire" in refused(custom(api, r1cs=patched(R1CS, CONSTRAINTS + 4, struct.pack("<I", 5000))), "r1cs")


def test_a_truncated_r1cs_is_refused(api: Client, uploads: Path) -> None:
    assert refused(custom(api, r1cs=R1CS[: len(R1CS) // 2]), "r1cs")


# ---- registered circom circuits ---------------------------------------------------------


def register(api: Client, **files: bytes) -> str:
    return register_files(api, zkey=ZKEY, **files)


def register_files(api: Client, **files: bytes) -> str:
    response = api.post("/api/v1/circuits", {name: SimpleUploadedFile(f"chain.{name}", data)
                                             for name, data in files.items()})
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def prove_wtns(api: Client, circuit: str, wtns: bytes) -> Any:
    return api.post(f"/api/v1/circuits/{circuit}/jobs", {"job_id": "w-1", "wtns": SimpleUploadedFile("w.wtns", wtns)})


def test_a_registered_circuit_with_its_r1cs_refuses_an_unsatisfying_witness(api: Client, uploads: Path) -> None:
    circuit = register(api, r1cs=R1CS)
    assert "constraint 198" in refused(prove_wtns(api, circuit, unsatisfying()), "wtns")
    assert prove_wtns(api, circuit, WTNS).status_code == 201  # snarkjs's own witness


def test_an_r1cs_with_a_malformed_constraint_is_refused_at_registration(api: Client, uploads: Path) -> None:
    body = {"zkey": SimpleUploadedFile("chain.zkey", ZKEY),
            "r1cs": SimpleUploadedFile("chain.r1cs", patched(R1CS, CONSTRAINTS + 4 + 4, b"\xff" * 32))}
    response = api.post("/api/v1/circuits", body)
    assert response.status_code == 400 and response.json()["field"] == "r1cs", response.content


def other_c(r1cs: bytes, curve: str) -> bytes:
    """The r1cs with its first constraint's first C coefficient changed: well formed, same
    header, another circuit."""
    at = payload(r1cs, 2)
    for _ in range(2):  # past A and B
        (k,) = struct.unpack_from("<I", r1cs, at)
        at += 4 + 36 * k
    (k,) = struct.unpack_from("<I", r1cs, at)
    assert k > 0
    value_at = at + 4 + 4
    value = (int.from_bytes(r1cs[value_at:value_at + 32], "little") + 1) % CURVES[curve][1]
    return patched(r1cs, value_at, value.to_bytes(32, "little"))


@pytest.mark.node
def test_a_wtns_failing_the_registered_r1cs_is_refused_while_inputs_are_accepted_at_once(
        api: Client, uploads: Path, circom_product: Any, tmp_path: Path) -> None:  # noqa: F811
    # the r1cs checks the witnesses clients send; a witness of inputs is the circuit's own
    # generator's, computed by the engine after the request
    build: CircomBuild = circom_product("bn128")
    circuit = register_files(api, zkey=build.zkey.read_bytes(), wasm=build.wasm.read_bytes(),
                             r1cs=other_c(build.r1cs.read_bytes(), "bn128"))
    (tmp_path / "input.json").write_text('{"a": "3", "b": ["4", "5"]}')
    assert oracle.run("wtns", "calculate", build.wasm, tmp_path / "input.json", tmp_path / "w.wtns").returncode == 0
    with open(tmp_path / "w.wtns", "rb") as fh:
        response = api.post(f"/api/v1/circuits/{circuit}/jobs", {"job_id": "wtns-1", "wtns": fh})
    assert "constraint 0" in refused(response, "wtns")
    response = api.post("/api/v1/jobs", {"circuit": circuit, "job_id": "in-1", "inputs": {"a": "3", "b": ["4", "5"]}},
                        content_type="application/json")
    assert response.status_code == 201, response.content
