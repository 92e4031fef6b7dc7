"""A circom circuit from source to a proof snarkjs accepts, through the API and the real engine.

circom2 compiles a tiny circuit at test time and snarkjs makes its zkey; the test registers
it, submits input signals (no witness file), lets the engine prove on the CPU and hands the
proof to `snarkjs groth16 verify`, on BN254 and BLS12-381.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from engine.api.uploads import CURVES
from engine.models import ProofJob
from tests.api.test_end_to_end import prove_queue, snarkjs_verifies
from tests.oracle import snarkjs as oracle
from tests.oracle.circom import CircomBuild, circom_product  # noqa: F401  the session fixture

# What is proved here is circom's and snarkjs's, the rows it writes those of any job.
pytestmark = [pytest.mark.slow, pytest.mark.node, pytest.mark.django_db(transaction=True), pytest.mark.database_agnostic]

Build = Callable[[str], CircomBuild]
CURVE_NAMES = ["bn128", "bls12381"]
GOOD = {"a": "3", "b": ["4", "5"]}


def register(api: Client, build: CircomBuild, sym: bool = True) -> str:
    with (open(build.zkey, "rb") as zkey, open(build.wasm, "rb") as wasm, open(build.r1cs, "rb") as r1cs,
          open(build.sym, "rb") as symbols):
        files = {"zkey": zkey, "wasm": wasm, "r1cs": r1cs, **({"sym": symbols} if sym else {})}
        response = api.post("/api/v1/circuits", files)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def submit(api: Client, circuit: str, job_id: str, inputs: dict[str, Any]) -> Any:
    return api.post("/api/v1/jobs", {"circuit": circuit, "job_id": job_id, "inputs": inputs},
                    content_type="application/json")


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_inputs_sent_for_a_registered_circuit_come_back_as_a_proof_snarkjs_verifies(
        api: Client, uploads: Path, tmp_path: Path, circom_product: Build, curve: str) -> None:  # noqa: F811
    build = circom_product(curve)
    circuit = register(api, build)
    assert submit(api, circuit, f"circom-{curve}", GOOD).status_code == 201
    prove_queue()

    job = api.get(f"/api/v1/jobs/circom-{curve}").json()
    assert (job["state"], job["curve"], job["circuit_id"]) == ("done", curve, f"circom/{circuit}"), job
    (part,) = api.get(f"/api/v1/jobs/circom-{curve}/proof/snarkjs").json()["partitions"]
    assert part["public"] == ["60", "3"]  # c = 3·4·5, then a
    res = oracle.run("zkey", "export", "verificationkey", build.zkey, tmp_path / "snarkjs_vk.json")
    assert res.returncode == 0, res.stderr
    assert snarkjs_verifies(json.loads((tmp_path / "snarkjs_vk.json").read_text()), part["proof"], part["public"],
                            tmp_path)


def test_the_same_inputs_again_are_the_same_job(api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    circuit = register(api, circom_product("bn128"))
    assert submit(api, circuit, "twice", GOOD).status_code == 201
    assert submit(api, circuit, "twice", GOOD).status_code == 200
    assert submit(api, circuit, "twice", {"a": "3", "b": ["4", "6"]}).status_code == 409


def test_two_jobs_of_one_circuit_both_verify(api: Client, uploads: Path, tmp_path: Path,
                                             circom_product: Build) -> None:  # noqa: F811
    build = circom_product("bn128")
    circuit = register(api, build)
    assert submit(api, circuit, "first", GOOD).status_code == 201
    assert submit(api, circuit, "second", {"a": "2", "b": ["9", "10"]}).status_code == 201
    prove_queue()
    vk = api.get(f"/api/v1/circuits/{circuit}/verification_key.json").json()
    for job_id, public in (("first", ["60", "3"]), ("second", ["180", "2"])):
        (part,) = api.get(f"/api/v1/jobs/{job_id}/proof/snarkjs").json()["partitions"]
        assert part["public"] == public
        assert snarkjs_verifies(vk, part["proof"], part["public"], tmp_path), job_id


def _bad(curve: str) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("missing", {"a": "3"}, "inputs.b"),
        ("unknown", {**GOOD, "zz": "1"}, "inputs.zz"),
        ("too-short", {"a": "3", "b": ["4"]}, "inputs.b"),
        ("out-of-field", {"a": str(CURVES[curve][1] + 1), "b": ["4", "5"]}, "inputs.a"),
    ]


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_bad_inputs_are_refused_naming_the_signal_before_any_job_exists(
        api: Client, uploads: Path, circom_product: Build, curve: str) -> None:  # noqa: F811
    circuit = register(api, circom_product(curve))
    for case, inputs, field in _bad(curve):
        response = submit(api, circuit, f"bad-{case}", inputs)
        assert response.status_code == 400 and response.json()["field"] == field, (case, response.content)
    assert not ProofJob.objects.exists()


def test_a_circuit_of_another_client_cannot_be_proved(api: Client, uploads: Path,
                                                      circom_product: Build) -> None:  # noqa: F811
    from engine.ledger.tokens import issue_token

    circuit = register(api, circom_product("bn128"))
    _, raw = issue_token("someone-else")
    other = Client(headers={"Authorization": f"Bearer {raw}"})
    response = submit(other, circuit, "not-mine", GOOD)
    assert response.status_code == 404 and response.json()["field"] == "circuit"


def test_without_the_sym_a_missing_signal_is_refused_by_count(api: Client, uploads: Path,
                                                              circom_product: Build) -> None:  # noqa: F811
    circuit = register(api, circom_product("bn128"), sym=False)
    response = submit(api, circuit, "missing-b", {"a": "3"})
    assert response.status_code == 400 and response.json()["field"] == "inputs"
    assert "1 of 3 values" in response.json()["detail"]


def snarkjs_wtns(build: CircomBuild, inputs: dict[str, Any], tmp: Path) -> Path:
    (tmp / "input.json").write_text(json.dumps(inputs))
    res = oracle.run("wtns", "calculate", build.wasm, tmp / "input.json", tmp / "w.wtns")
    assert res.returncode == 0, res.stderr
    return tmp / "w.wtns"


def submit_wtns(api: Client, circuit: str, job_id: str, wtns: Path) -> Any:
    with open(wtns, "rb") as fh:
        return api.post(f"/api/v1/circuits/{circuit}/jobs", {"job_id": job_id, "wtns": fh})


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_a_ready_witness_for_a_registered_circuit_is_proved_for_snarkjs(
        api: Client, uploads: Path, tmp_path: Path, circom_product: Build, curve: str) -> None:  # noqa: F811
    build = circom_product(curve)
    circuit = register(api, build)
    response = submit_wtns(api, circuit, f"wtns-{curve}", snarkjs_wtns(build, GOOD, tmp_path))
    assert response.status_code == 201, response.content
    prove_queue()
    (part,) = api.get(f"/api/v1/jobs/wtns-{curve}/proof/snarkjs").json()["partitions"]
    vk = api.get(f"/api/v1/circuits/{circuit}/verification_key.json").json()
    assert part["public"] == ["60", "3"] and snarkjs_verifies(vk, part["proof"], part["public"], tmp_path)


def test_inputs_and_a_wtns_under_one_job_id_are_two_requests(
        api: Client, uploads: Path, tmp_path: Path, circom_product: Build) -> None:  # noqa: F811
    # the witness of inputs is computed by the engine, after the request: the request cannot
    # know it is the same witness as a .wtns sent before or after
    build = circom_product("bn128")
    circuit = register(api, build)
    assert submit(api, circuit, "either-way", GOOD).status_code == 201
    assert submit_wtns(api, circuit, "either-way", snarkjs_wtns(build, GOOD, tmp_path)).status_code == 409


def test_a_failing_assertion_fails_the_job_with_the_generator_s_message(
        api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    circuit = register(api, circom_product("bn128"))
    assert submit(api, circuit, "seven", {"a": "7", "b": ["4", "5"]}).status_code == 201  # accepted at once
    prove_queue()
    job = api.get("/api/v1/jobs/seven").json()
    assert job["state"] == "failed"
    assert "an assertion in the circuit failed" in job["error"] and "Product" in job["error"], job["error"]


def test_a_witness_over_the_other_curve_is_refused(api: Client, uploads: Path, tmp_path: Path,
                                                   circom_product: Build) -> None:  # noqa: F811
    circuit = register(api, circom_product("bn128"))
    response = submit_wtns(api, circuit, "wrong-curve", snarkjs_wtns(circom_product("bls12381"), GOOD, tmp_path))
    assert response.status_code == 400 and response.json()["field"] == "wtns"
    assert not ProofJob.objects.exists()


def test_jobs_of_one_circuit_share_one_key_load_held_in_the_key_cache(
        api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    from engine.pipeline.host import Engine, EngineConfig
    from engine.pipeline.keys import load_proving_key

    circuit = register(api, circom_product("bn128"))
    for job_id in ("shared-1", "shared-2", "shared-3"):
        assert submit(api, circuit, job_id, GOOD | {"a": str(len(job_id) + int(job_id[-1]))}).status_code == 201
    loads: list[str] = []

    def counting_loader(circuit_id: str) -> Any:
        loads.append(circuit_id)
        return load_proving_key(circuit_id)

    engine = Engine(EngineConfig.from_settings(devices="cpu", synthesis=1, workers_per_device=1, scale="tiny",
                                               host_name="circom-keys"), key_loader=counting_loader).start()
    try:
        assert engine.run_until_idle(timeout=240)
        cached = [entry["circuit_id"] for entry in engine.keycache.snapshot()]
    finally:
        engine.stop(drain_seconds=5)
    assert loads == [f"circom/{circuit}"] and cached == [f"circom/{circuit}"]
    assert all(api.get(f"/api/v1/jobs/{j}").json()["state"] == "done" for j in ("shared-1", "shared-2", "shared-3"))


def test_a_circuit_record_names_its_input_signals_and_the_name_it_was_given(
        api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    build = circom_product("bn128")
    with (open(build.zkey, "rb") as zkey, open(build.wasm, "rb") as wasm, open(build.sym, "rb") as symbols):
        response = api.post("/api/v1/circuits", {"zkey": zkey, "wasm": wasm, "sym": symbols, "name": "product-v1"})
    assert response.status_code == 201, response.content
    record = api.get(f"/api/v1/circuits/{response.json()['id']}").json()
    assert record["name"] == "product-v1"
    assert record["inputs"] == {"a": 1, "b": 2} and record["input_count"] == 3  # GOOD's shape


def test_inputs_for_a_circuit_without_its_wasm_are_refused_naming_the_routes_that_take_a_witness(
        api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    build = circom_product("bn128")
    with open(build.zkey, "rb") as zkey:
        circuit = api.post("/api/v1/circuits", {"zkey": zkey}).json()["id"]
    response = submit(api, circuit, "no-wasm", GOOD)
    assert response.status_code == 409 and response.json()["error"] == "no_wasm"
    detail = response.json()["detail"]
    assert f"POST /api/v1/circuits/{circuit}/jobs" in detail and "POST /api/v1/jobs/custom" in detail


def test_a_wasm_sent_after_the_zkey_names_the_circuit_s_inputs_at_once(
        api: Client, uploads: Path, circom_product: Build) -> None:  # noqa: F811
    build = circom_product("bn128")
    with open(build.zkey, "rb") as zkey, open(build.sym, "rb") as symbols:
        first = api.post("/api/v1/circuits", {"zkey": zkey, "sym": symbols}).json()
    assert first["inputs"] is None
    with open(build.zkey, "rb") as zkey, open(build.wasm, "rb") as wasm:
        again = api.post("/api/v1/circuits", {"zkey": zkey, "wasm": wasm})
    assert again.status_code == 200, again.content
    assert again.json()["inputs"] == {"a": 1, "b": 2} and again.json()["input_count"] == 3
    assert api.get(f"/api/v1/circuits/{first['id']}").json()["inputs"] == {"a": 1, "b": 2}
