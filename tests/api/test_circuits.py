"""POST/GET/DELETE /api/v1/circuits: circom circuits registered once, owned by their token."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.ledger.jobs import submit_job
from engine.ledger.tokens import issue_token
from engine.models import Circuit
from engine.prover.snarkjs import read_zkey
from engine.solidity_verifier import constants
from tests.oracle import snarkjs as oracle

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
BN254_ZKEY = FIXTURES / "bn128" / "circuit.zkey"


def register(api: Client, zkey: bytes | None = None, **files: bytes) -> Any:
    body = {"zkey": SimpleUploadedFile("chain.zkey", BN254_ZKEY.read_bytes() if zkey is None else zkey)}
    body.update({name: SimpleUploadedFile(f"chain.{name}", data) for name, data in files.items()})
    return api.post("/api/v1/circuits", body)


def other_client() -> Client:
    _, raw = issue_token("another-team")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def test_a_registered_zkey_becomes_a_circuit_stored_under_its_digest(api: Client, uploads: Path) -> None:
    response = register(api)
    assert response.status_code == 201, response.content
    body = response.json()
    digest = hashlib.sha256(BN254_ZKEY.read_bytes()).hexdigest()
    assert (body["id"], body["curve"], body["n_public"]) == (digest, "bn128", 2)
    assert (uploads / "circuits" / digest / "circuit.zkey").read_bytes() == BN254_ZKEY.read_bytes()
    assert Circuit.objects.get().owner is not None


def test_the_header_counts_are_the_ones_the_prover_reads(api: Client, uploads: Path) -> None:
    key = read_zkey(BN254_ZKEY)
    body = register(api).json()
    assert (body["n_public"], body["n_vars"], body["domain_size"]) == (key.n_public, key.n_vars, key.domain_size)


def test_registering_the_same_zkey_again_returns_the_existing_circuit(api: Client, uploads: Path) -> None:
    first = register(api).json()
    again = register(api)
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert Circuit.objects.count() == 1
    assert [p.name for p in (uploads / "circuits").iterdir()] == [first["id"]]


def test_a_client_lists_only_its_own_circuits(api: Client, uploads: Path) -> None:
    register(api)
    assert other_client().get("/api/v1/circuits").json() == []
    assert len(api.get("/api/v1/circuits").json()) == 1


def test_an_operator_token_lists_every_circuit(api: Client, operator_api: Client, uploads: Path) -> None:
    register(api)
    assert len(operator_api.get("/api/v1/circuits").json()) == 1


def test_another_clients_circuit_is_not_found(api: Client, uploads: Path) -> None:
    circuit = register(api).json()["id"]
    assert other_client().get(f"/api/v1/circuits/{circuit}").status_code == 404


def test_a_circuit_reads_back_by_id(api: Client, uploads: Path) -> None:
    circuit = register(api).json()
    assert api.get(f"/api/v1/circuits/{circuit['id']}").json() == circuit


def test_a_deleted_circuit_is_gone_with_its_files(api: Client, uploads: Path) -> None:
    circuit = register(api).json()["id"]
    assert api.delete(f"/api/v1/circuits/{circuit}").status_code == 204
    assert not Circuit.objects.exists() and not (uploads / "circuits" / circuit).exists()


def test_a_circuit_an_active_job_uses_cannot_be_deleted(api: Client, uploads: Path) -> None:
    circuit = Circuit.objects.get(pk=register(api).json()["id"])
    submit_job(kind="custom", job_id="uses-it", inputs={"circuit": circuit.pk}, num_partitions=1,
               circuit_id=circuit.job_circuit_id, curve=circuit.curve)
    response = api.delete(f"/api/v1/circuits/{circuit.pk}")
    assert response.status_code == 409 and "uses-it" in response.json()["detail"]
    assert Circuit.objects.filter(pk=circuit.pk).exists()


@pytest.mark.parametrize("damage, says", [
    (lambda z: z[:-100], "truncated"),
    (lambda z: z + b"\0" * 8, "after its last section"),
    (lambda z: b"wtns" + z[4:], "not a snarkjs .zkey"),
])
def test_a_damaged_zkey_is_refused_at_upload(api: Client, uploads: Path, damage: Any, says: str) -> None:
    response = register(api, zkey=damage(BN254_ZKEY.read_bytes()))
    assert response.status_code == 400 and response.json()["field"] == "zkey", response.content
    assert says in response.json()["detail"]
    assert not Circuit.objects.exists() and list((uploads / "circuits").iterdir()) == []


def test_an_r1cs_of_another_circuit_is_refused(api: Client, uploads: Path) -> None:
    response = register(api, r1cs=(FIXTURES / "bls12381" / "circuit.r1cs").read_bytes())
    assert response.status_code == 400 and response.json()["field"] == "r1cs"


def test_a_wasm_that_is_not_a_witness_generator_is_refused(api: Client, uploads: Path) -> None:
    response = register(api, wasm=b"\0asm\1\0\0\0")
    assert response.status_code == 400 and response.json()["field"] == "wasm"


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_the_verification_key_is_the_one_snarkjs_exports(api: Client, uploads: Path, curve: str) -> None:
    zkey = FIXTURES / curve / "circuit.zkey"
    circuit = register(api, zkey=zkey.read_bytes()).json()["id"]
    ours = api.get(f"/api/v1/circuits/{circuit}/verification_key.json").json()
    committed = json.loads((FIXTURES / curve / "verification_key.json").read_text())
    assert ours == committed


@pytest.mark.node
@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_the_verification_key_matches_snarkjs_run_now(api: Client, uploads: Path, tmp_path: Path, curve: str) -> None:
    zkey = FIXTURES / curve / "circuit.zkey"
    res = oracle.run("zkey", "export", "verificationkey", zkey, tmp_path / "vk.json")
    assert res.returncode == 0, res.stderr
    circuit = register(api, zkey=zkey.read_bytes()).json()["id"]
    ours = api.get(f"/api/v1/circuits/{circuit}/verification_key.json").json()
    theirs = json.loads((tmp_path / "vk.json").read_text())
    for field in theirs:
        assert ours[field] == theirs[field], field


def _solidity_constants(source: str) -> dict[str, str]:
    return dict(re.findall(r"uint256 constant (\w+)\s*=\s*(\d+);", source))


def _abi_of_verify_proof(source: str) -> list[str]:
    """verifyProof's parameter types, uint spelled uint256 (the ABI's name, so the selector's)."""
    params = re.search(r"function verifyProof\(([^)]*)\)", source)
    assert params is not None
    return [re.sub(r"\buint\b", "uint256", p.split()[0]) for p in params.group(1).split(",")]


@pytest.mark.node
def test_the_solidity_verifier_declares_the_constants_snarkjs_exports(api: Client, uploads: Path,
                                                                      tmp_path: Path) -> None:
    res = oracle.run("zkey", "export", "solidityverifier", BN254_ZKEY, tmp_path / "verifier.sol")
    assert res.returncode == 0, res.stderr
    circuit = register(api).json()["id"]
    response = api.get(f"/api/v1/circuits/{circuit}/verifier.sol")
    assert response.status_code == 200
    ours = _solidity_constants(response.content.decode())
    theirs = (tmp_path / "verifier.sol").read_text()
    assert ours == _solidity_constants(theirs)
    assert _abi_of_verify_proof(response.content.decode()) == _abi_of_verify_proof(theirs)
    assert len(ours) == len(constants(api.get(f"/api/v1/circuits/{circuit}/verification_key.json").json()))


def test_a_bls12_381_circuit_has_no_solidity_verifier(api: Client, uploads: Path) -> None:
    circuit = register(api, zkey=(FIXTURES / "bls12381" / "circuit.zkey").read_bytes()).json()["id"]
    assert api.get(f"/api/v1/circuits/{circuit}/verifier.sol").status_code == 409


def test_a_sym_that_names_no_signal_is_refused(api: Client, uploads: Path) -> None:
    response = register(api, sym=b"\xff\xfe not text")
    assert response.status_code == 400 and response.json()["field"] == "sym"


def test_a_file_missing_from_a_registered_circuit_joins_it_when_the_zkey_is_sent_again(
        api: Client, uploads: Path) -> None:
    first = register(api).json()
    r1cs = (FIXTURES / "bn128" / "circuit.r1cs").read_bytes()
    again = register(api, r1cs=r1cs)
    assert again.status_code == 200 and (first["r1cs_bytes"], again.json()["r1cs_bytes"]) == (None, len(r1cs))
    assert (uploads / "circuits" / first["id"] / "circuit.r1cs").read_bytes() == r1cs


def test_registered_circuits_are_listed_in_the_admin(api: Client, uploads: Path, admin_client: Client) -> None:
    circuit = register(api).json()["id"]
    response = admin_client.get("/admin/engine/circuit/")
    assert response.status_code == 200 and circuit in response.content.decode()


@pytest.mark.parametrize("circuit_id", ["abc", "A" * 64, "0" * 63 + "\x00"])
def test_an_id_that_is_no_sha256_is_not_found(api: Client, uploads: Path, circuit_id: str) -> None:
    response = api.get(f"/api/v1/circuits/{circuit_id}")
    assert response.status_code == 404 and response.json()["field"] == "circuit"
