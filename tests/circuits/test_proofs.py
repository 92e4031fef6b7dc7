"""Every kind proves end to end: our verifier and snarkjs accept, a dishonest witness is refused,
and the native synthesis proves byte for byte what the Python one did."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.circuits.kinds import FIXED_PARTITIONS, SIZES, circuit_for
from engine.circuits.synthesis import synthesize, synthesize_in_python, synthesize_partition
from engine.prover.datatypes import UnsatisfiedConstraint
from tests.circuits.test_kinds import inputs_for
from tests.conftest import require_service

SNARKJS = Path(__file__).resolve().parents[1] / "oracle" / "node_modules" / "snarkjs" / "build" / "cli.cjs"
KINDS = list(SIZES)
_KEYS: dict[str, tuple] = {}


def keys(circuit_id: str):
    """One development setup per circuit for the whole session (fixed seed: reproducible)."""
    from engine.prover.setup import setup

    if circuit_id not in _KEYS:
        kind, scale = circuit_id.split("/")
        _KEYS[circuit_id] = setup(circuit_for(kind, scale).r1cs(), seed=7)
    return _KEYS[circuit_id]


def prove_partition(kind: str, scale: str, index: int):
    from engine.prover.groth16 import prove, public_inputs_of

    pk, vk = keys(f"{kind}/{scale}")
    assignment = synthesize_partition(f"{kind}/{scale}", inputs_for(kind), index)
    return vk, prove(pk, assignment), public_inputs_of(assignment)


def snarkjs_verify(tmp_path: Path, vk, proof, public: list[int]) -> subprocess.CompletedProcess:
    from engine.prover.snarkjs import write_proof_json, write_public_json, write_vk_json

    require_service(shutil.which("node") is not None and SNARKJS.exists(), "Node.js and tests/oracle's snarkjs (npm ci --prefix tests/oracle)")
    write_vk_json(tmp_path / "verification_key.json", vk)
    write_proof_json(tmp_path / "proof.json", proof)
    write_public_json(tmp_path / "public.json", public)
    return subprocess.run(
        ["node", str(SNARKJS), "groth16", "verify", "verification_key.json", "public.json", "proof.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_tiny_partition_proof_verifies_with_our_verifier(kind: str) -> None:
    from engine.prover.verify import verify

    vk, proof, public = prove_partition(kind, "tiny", 0)
    assert verify(vk, proof, public)


# snarkjs's BLS12-381 verifier takes ~8 s per call on 2 cores (Node start, wasm pairing).
@pytest.mark.slow
@pytest.mark.node
@pytest.mark.parametrize("kind", KINDS)
def test_tiny_partition_proof_verifies_with_snarkjs(kind: str, tmp_path: Path) -> None:
    vk, proof, public = prove_partition(kind, "tiny", 0)
    result = snarkjs_verify(tmp_path, vk, proof, public)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.node
@pytest.mark.parametrize("kind", KINDS)
def test_small_partition_proof_verifies_with_our_verifier_and_snarkjs(kind: str, tmp_path: Path) -> None:
    from engine.prover.verify import verify

    vk, proof, public = prove_partition(kind, "small", 0)
    assert verify(vk, proof, public)
    result = snarkjs_verify(tmp_path, vk, proof, public)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr


def test_a_proof_does_not_verify_for_another_partitions_challenges() -> None:
    from engine.prover.verify import verify

    vk, proof, _ = prove_partition("porep-c2", "tiny", 0)
    other = circuit_for("porep-c2", "tiny").public_inputs(inputs_for("porep-c2"), 1)
    assert not verify(vk, proof, other)


def test_a_wrong_leaf_yields_no_proof() -> None:
    # The refusal comes from synthesis, before any group operation is spent on it.
    shape = circuit_for("winning-post", "tiny")
    data = shape.partition_data(inputs_for("winning-post"), 0)
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint \d+ not satisfied$"):
        synthesize(shape, dataclasses.replace(data, leaves=[data.leaves[0] ^ 1]))


def test_the_prover_itself_refuses_an_unsatisfied_assignment() -> None:
    from engine.prover.groth16 import prove

    shape = circuit_for("winning-post", "tiny")
    data = shape.partition_data(inputs_for("winning-post"), 0)
    assignment = synthesize(shape, dataclasses.replace(data, roots=[data.roots[0] + 1]), check=False)
    pk, _ = keys(shape.circuit_id)
    with pytest.raises(UnsatisfiedConstraint, match=r"constraint \d+ not satisfied"):
        prove(pk, assignment)


@pytest.mark.parametrize("kind", KINDS)
def test_the_native_and_the_python_synthesis_prove_byte_identical_proofs(kind: str, tmp_path: Path) -> None:
    from engine.prover.groth16 import prove
    from engine.prover.snarkjs import write_proof_json
    from engine.prover.verify import verify

    shape = circuit_for(kind, "tiny")
    pk, vk = keys(shape.circuit_id)
    data = shape.partition_data(inputs_for(kind), 1 % FIXED_PARTITIONS.get(kind, 1))
    files = []
    for path in (synthesize, synthesize_in_python):
        proof = prove(pk, path(shape, data), r=12345, s=67890)  # the same randomness: the same proof
        files.append(tmp_path / f"{path.__name__}.json")
        write_proof_json(files[-1], proof)
    assert files[0].read_bytes() == files[1].read_bytes()
    assert verify(vk, proof, data.public_inputs())
