"""A real engine's proof, downloaded as bytes and verified by snarkjs with the downloaded key.

One winning-post job goes through the API and the engine on the CPU; then the compressed bytes
decode (arkworks) to the snarkjs proof, and `snarkjs groth16 verify` accepts that proof with
the key from /kinds/winning-post/verification_key.json, which is also the job's own key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from engine.prover import snarkjs
from engine.prover.verify import verify
from tests.api.conftest import RANDOMNESS, SEED
from tests.api.test_end_to_end import prove_queue
from tests.api.test_proof_bytes import arkworks_g1, arkworks_g2, g1_ints, g2_ints
from tests.oracle import snarkjs as oracle

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_engines_proof_as_bytes_and_its_downloaded_key_verify_in_snarkjs(
        api: Client, uploads: Path, tmp_path: Path, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "SCALE": "tiny"}
    body = {"kind": "winning-post", "job_id": "formats-wp-1", "inputs": {"sector_seed": SEED, "randomness": RANDOMNESS}}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201
    prove_queue()
    assert api.get("/api/v1/jobs/formats-wp-1").json()["state"] == "done"

    (part,) = api.get("/api/v1/jobs/formats-wp-1/proof/snarkjs").json()["partitions"]
    data = api.get("/api/v1/jobs/formats-wp-1/proof?format=bytes").content
    assert len(data) == 192
    assert arkworks_g1(data[:48]) == g1_ints(part["proof"]["pi_a"])
    assert arkworks_g2(data[48:144]) == g2_ints(part["proof"]["pi_b"])
    assert arkworks_g1(data[144:]) == g1_ints(part["proof"]["pi_c"])

    vk = api.get("/api/v1/kinds/winning-post/verification_key.json").json()
    assert api.get("/api/v1/jobs/formats-wp-1/verification_key.json").json() == vk
    assert verify(snarkjs.vk_from_json(vk), snarkjs.proof_from_json(part["proof"]), [int(x) for x in part["public"]])
    oracle.require_snarkjs()
    for name, content in (("vk.json", vk), ("proof.json", part["proof"]), ("public.json", part["public"])):
        (tmp_path / name).write_text(json.dumps(content))
    assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")
