"""Verifying keys for download: /kinds/<kind>/verification_key.json and /jobs/<id>/verification_key.json.

The key served for an uploaded zkey is compared with the one snarkjs itself exported for that
zkey, and snarkjs verifies the API's proofs with the downloaded keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from engine.circuits.keystore import KeyStore
from engine.circuits.kinds import circuit_for
from engine.models import Partition, ProofJob
from engine.states import Curve, JobState, PartitionState
from tests.oracle import snarkjs as oracle

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
FOLDER: dict[str, str] = {Curve.BN254: "bn128", Curve.BLS12_381: "bls12381"}


def fixture(curve: str, name: str) -> Any:
    return json.loads((FIXTURES / FOLDER[curve] / name).read_text())


def uploaded_and_proved(api: Client, job_id: str, curve: str) -> ProofJob:
    """A custom job uploaded through the API, then recorded done with the fixture's proof (what
    an engine proving the fixture's witness writes), so no engine has to run."""
    here = FIXTURES / FOLDER[curve]
    with open(here / "circuit.zkey", "rb") as zkey, open(here / "witness.wtns", "rb") as wtns:
        response = api.post("/api/v1/jobs/custom", {"job_id": job_id, "zkey": zkey, "wtns": wtns})
    assert response.status_code == 201, response.content
    proof, public = fixture(curve, "proof.json"), fixture(curve, "public.json")
    Partition.objects.filter(job__job_id=job_id).update(state=PartitionState.DONE, proof=proof,
                                                        public_inputs=public)
    ProofJob.objects.filter(job_id=job_id).update(state=JobState.DONE, proof=[proof], public_inputs=[public],
                                                  verified=True)
    return ProofJob.objects.get(job_id=job_id)


def snarkjs_verifies(client: Client, job_id: str, tmp: Path) -> bool:
    """`snarkjs groth16 verify` on the downloaded key and the API's snarkjs proof files."""
    vk = client.get(f"/api/v1/jobs/{job_id}/verification_key.json")
    assert vk.status_code == 200, vk.content
    (part,) = client.get(f"/api/v1/jobs/{job_id}/proof/snarkjs").json()["partitions"]
    for name, body in (("vk.json", vk.json()), ("proof.json", part["proof"]), ("public.json", part["public"])):
        (tmp / name).write_text(json.dumps(body))
    return oracle.groth16_verify(tmp / "vk.json", tmp / "public.json", tmp / "proof.json")


@pytest.mark.parametrize("curve", [Curve.BN254, Curve.BLS12_381])
def test_an_uploaded_zkeys_key_is_the_one_snarkjs_exports(api: Client, uploads: Path, curve: str) -> None:
    uploaded_and_proved(api, "mine-1", curve)
    served = api.get("/api/v1/jobs/mine-1/verification_key.json").json()
    assert served == fixture(curve, "verification_key.json")


@pytest.mark.node
@pytest.mark.parametrize("curve", [Curve.BN254, Curve.BLS12_381])
def test_snarkjs_verifies_an_uploaded_circuits_proof_with_the_downloaded_key(
        api: Client, uploads: Path, tmp_path: Path, curve: str) -> None:
    oracle.require_snarkjs()
    uploaded_and_proved(api, "mine-2", curve)
    assert snarkjs_verifies(api, "mine-2", tmp_path)


@pytest.mark.node
def test_the_solidity_calldata_is_what_snarkjs_prints_for_the_same_proof(api: Client, uploads: Path) -> None:
    uploaded_and_proved(api, "calldata", Curve.BN254)
    here = FIXTURES / FOLDER[Curve.BN254]
    printed = oracle.run("zkey", "export", "soliditycalldata", here / "public.json", here / "proof.json")
    assert printed.returncode == 0, printed.stderr
    (part,) = api.get("/api/v1/jobs/calldata/proof/soliditycalldata").json()["partitions"]
    assert part["calldata"] == printed.stdout.strip()


def test_each_partitions_proof_and_public_json_download_as_the_files_snarkjs_reads(api: Client, uploads: Path) -> None:
    uploaded_and_proved(api, "files", Curve.BN254)
    proof = api.get("/api/v1/jobs/files/proof/snarkjs/0/proof.json")
    public = api.get("/api/v1/jobs/files/proof/snarkjs/0/public.json")
    assert proof.status_code == public.status_code == 200
    assert proof["Content-Disposition"] == 'attachment; filename="proof.json"'
    (part,) = api.get("/api/v1/jobs/files/proof/snarkjs").json()["partitions"]
    assert (json.loads(proof.content), json.loads(public.content)) == (part["proof"], part["public"])
    assert api.get("/api/v1/jobs/files/proof/snarkjs/1/proof.json").json()["field"] == "index"


def test_a_bls12_381_job_has_no_solidity_calldata(api: Client, uploads: Path) -> None:
    uploaded_and_proved(api, "no-evm", Curve.BLS12_381)
    response = api.get("/api/v1/jobs/no-evm/proof/soliditycalldata")
    assert response.status_code == 409 and "BN254" in response.json()["detail"]


def test_another_clients_job_key_is_not_found(api: Client, operator_api: Client, uploads: Path) -> None:
    uploaded_and_proved(operator_api, "theirs", Curve.BN254)
    assert api.get("/api/v1/jobs/theirs/verification_key.json").status_code == 404


@pytest.fixture
def params(settings, tmp_path: Path) -> Path:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PARAMS_DIR": tmp_path / "params", "SCALE": "tiny"}
    return tmp_path / "params"


@pytest.fixture(scope="module")
def winning_post_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """winning-post/tiny keys from one setup, copied into a test's params directory."""
    base = tmp_path_factory.mktemp("params-once")
    KeyStore(base).ensure_keys(circuit_for("winning-post", "tiny"), seed=5)
    return base


def test_a_kinds_key_not_made_yet_is_a_409_naming_the_command(api: Client, params: Path) -> None:
    response = api.get("/api/v1/kinds/winning-post/verification_key.json")
    assert response.status_code == 409
    assert "manage.py setupkeys --kind winning-post --scale tiny" in response.json()["detail"]


def test_a_kinds_key_is_the_file_the_setup_wrote(api: Client, params: Path, winning_post_keys: Path) -> None:
    shutil.copytree(winning_post_keys, params)
    response = api.get("/api/v1/kinds/winning-post/verification_key.json")
    assert response.status_code == 200
    written = KeyStore(params).verifying_key_path("winning-post/tiny")
    assert response.json() == json.loads(written.read_text())
    assert response.json()["curve"] == "bls12381"


def test_a_damaged_key_file_is_refused_not_served(api: Client, params: Path, winning_post_keys: Path) -> None:
    shutil.copytree(winning_post_keys, params)
    path = KeyStore(params).verifying_key_path("winning-post/tiny")
    path.write_text(path.read_text().replace('"nPublic": ', '"nPublic": 1'))
    response = api.get("/api/v1/kinds/winning-post/verification_key.json")
    assert response.status_code == 409
    assert response.json()["error"] == "keys_corrupt"


def test_an_unknown_kind_is_refused_naming_the_kinds(api: Client) -> None:
    response = api.get("/api/v1/kinds/no-such-kind/verification_key.json")
    assert response.status_code == 400
    assert response.json()["field"] == "kind" and "winning-post" in response.json()["detail"]


def test_a_built_in_jobs_key_is_its_kinds_key(api: Client, params: Path, winning_post_keys: Path) -> None:
    shutil.copytree(winning_post_keys, params)
    body = {"kind": "winning-post", "job_id": "wp-key", "inputs": {"sector_seed": "11" * 32, "randomness": "2a" * 32}}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201
    assert (api.get("/api/v1/jobs/wp-key/verification_key.json").json()
            == api.get("/api/v1/kinds/winning-post/verification_key.json").json())
