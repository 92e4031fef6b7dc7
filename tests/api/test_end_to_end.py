"""End to end through the API: submit, let the real engine prove, download, verify on our own.

The proof is checked independently of the engine's own verification: with the circuit's
verifying key through engine.prover.verify, and with snarkjs itself where Node is installed.
A bounded schemathesis burst runs first against the committed database, so the engine is shown
to prove a job whatever the fuzzer left behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err

from engine.api.status import status_schema
from engine.circuits.keystore import KeyStore
from engine.pipeline.host import Engine, EngineConfig
from engine.prover import snarkjs
from engine.prover.formats import snarkjs_json
from engine.prover.verify import verify
from tests.api.conftest import RANDOMNESS, SEED
from tests.oracle import snarkjs as oracle

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
FUZZ_EXAMPLES = 15


def prove_queue(timeout: float = 240, watch: Client | None = None) -> list[dict[str, Any]]:
    """Run the real engine on the CPU until the queue is empty; with ``watch``, read /status
    through that client while it works and return what was seen."""
    engine = Engine(EngineConfig.from_settings(devices="cpu", synthesis=1, workers_per_device=1,
                                               scale="tiny", host_name="api-e2e")).start()
    seen: list[dict[str, Any]] = []
    try:
        if watch is not None:
            deadline = time.monotonic() + timeout
            while not (engine.signals.queue_empty.is_set() and not engine.inflight) and time.monotonic() < deadline:
                seen.append(watch.get("/status").json())
                time.sleep(0.2)
        assert engine.run_until_idle(timeout=timeout), "the engine did not drain the queue in time"
        if watch is not None:
            seen.append(watch.get("/status").json())
    finally:
        engine.stop(drain_seconds=5)
    return seen


def snarkjs_verifies(vk: dict[str, Any], proof: dict[str, Any], public: list[str], tmp: Path) -> bool:
    """snarkjs's own verdict (the oracle helper skips, or fails in CI, without Node)."""
    for name, body in (("vk.json", vk), ("proof.json", proof), ("public.json", public)):
        (tmp / name).write_text(json.dumps(body))
    return oracle.groth16_verify(tmp / "vk.json", tmp / "public.json", tmp / "proof.json")


def test_a_job_submitted_through_the_api_comes_back_with_a_proof_that_verifies(
        api: Client, operator_api: Client, uploads: Path, tmp_path: Path) -> None:
    body = {"kind": "window-post", "job_id": "e2e-window-post-0001",
            "inputs": {"sector_seed": SEED, "randomness": RANDOMNESS, "partitions": 2}}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201
    seen = prove_queue(watch=operator_api)

    # /status, as the live engine wrote the records, keeps to the committed schema throughout.
    for snap in seen:
        jsonschema.validate(snap, status_schema())
    assert any(h["name"] == "api-e2e" and not h["stale"] for h in seen[-1]["hosts"])
    job = api.get("/api/v1/jobs/e2e-window-post-0001").json()
    assert job["state"] == "done", job
    assert all(p["state"] == "done" and p["gpu_ms"] is not None for p in job["partitions"])
    files = api.get("/api/v1/jobs/e2e-window-post-0001/proof/snarkjs").json()
    vk = KeyStore(django_settings.PROVINGSITE["PARAMS_DIR"]).load_verifying_key(job["circuit_id"])
    for part in files["partitions"]:
        proof = snarkjs.proof_from_json(part["proof"])
        assert verify(vk, proof, [int(x) for x in part["public"]]), f"partition {part['index']} does not verify"
    # Our own format carries the same proofs.
    ours = api.get("/api/v1/jobs/e2e-window-post-0001/proof").json()
    assert [p["index"] for p in ours["partitions"]] == [0, 1]
    # The job names the key its proofs verified under: the one the API serves for it.
    served = api.get("/api/v1/jobs/e2e-window-post-0001/verification_key.json").json()
    assert job["vk_digest"] == snarkjs_json.vk_digest_of_json(served)
    assert {p["vk_digest"] for p in job["partitions"]} == {job["vk_digest"]}

    if oracle.snarkjs_path() is not None:
        vk_json = snarkjs.vk_to_json(vk)
        for part in files["partitions"]:
            assert snarkjs_verifies(vk_json, part["proof"], part["public"], tmp_path)


def test_a_custom_snarkjs_circuit_uploaded_through_the_api_is_proved_for_snarkjs(
        api: Client, uploads: Path, tmp_path: Path) -> None:
    here = FIXTURES / "bn128"
    response = api.post("/api/v1/jobs/custom", {
        "job_id": "e2e-custom-chain",
        "zkey": open(here / "circuit.zkey", "rb"),  # noqa: SIM115 the client closes it
        "wtns": open(here / "witness.wtns", "rb"),  # noqa: SIM115
    })
    assert response.status_code == 201, response.content
    prove_queue()

    job = api.get("/api/v1/jobs/e2e-custom-chain").json()
    assert job["state"] == "done", job
    assert job["vk_digest"] == snarkjs_json.vk_digest_of_json(json.loads((here / "verification_key.json").read_text()))
    (part,) = api.get("/api/v1/jobs/e2e-custom-chain/proof/snarkjs").json()["partitions"]
    assert part["public"] == json.loads((here / "public.json").read_text())
    vk = snarkjs.read_vk_json(here / "verification_key.json")
    assert verify(vk, snarkjs.proof_from_json(part["proof"]), [int(x) for x in part["public"]])
    oracle.require_snarkjs()
    assert snarkjs_verifies(json.loads((here / "verification_key.json").read_text()), part["proof"], part["public"],
                            tmp_path)


def test_after_a_fuzzing_burst_the_engine_still_proves_a_job(token: str, api: Client, uploads: Path) -> None:
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
    auth = {"Authorization": f"Bearer {token}"}
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def burst(case: Any) -> None:
            case.call_and_validate(headers=auth, checks=[not_a_server_error])

        burst()

    body = {"kind": "winning-post", "job_id": "after-the-fuzz",
            "inputs": {"sector_seed": SEED, "randomness": RANDOMNESS}}
    assert api.post("/api/v1/jobs", body, content_type="application/json").status_code == 201
    # Cancel what the fuzzer queued, so the engine's drain is about our job alone.
    queued: dict[str, str | int] = {"state": "queued", "limit": 500}
    for item in api.get("/api/v1/jobs", queued).json()["items"]:
        if item["job_id"] != "after-the-fuzz":
            api.post(f"/api/v1/jobs/{item['job_id']}/cancel")
    prove_queue()
    assert api.get("/api/v1/jobs/after-the-fuzz").json()["state"] == "done"
