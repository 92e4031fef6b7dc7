"""Groth16 end to end: our proofs verify with snarkjs and our verifier, snarkjs's proofs verify
with ours, for a snarkjs-made key (committed fixture) and one from our setup, both curves;
bad proofs, inputs and witnesses are rejected with clear errors; the split path and the
one-shot path give byte-identical proofs for the same r, s, and so do the CPU backend and the
CUDA one (on the host emulation of its kernels) under the one orchestration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.prover import gpu_prove_finish, gpu_prove_start, select_device
from engine.prover.datatypes import UnsatisfiedConstraint
from engine.prover.groth16 import (
    ProofAborted,
    assignment_from_r1cs,
    assignment_from_witness,
    prove,
    public_inputs_of,
)
from engine.prover.params.curves import get_curve
from engine.prover.r1cs import Assignment
from engine.prover.setup import DEV_SETUP_NOTICE, setup, synthetic_circuit
from engine.prover.snarkjs import (
    proof_to_json,
    read_proof_json,
    read_public_json,
    read_vk_json,
    read_wtns,
    read_zkey,
    write_proof_json,
    write_public_json,
    write_r1cs,
    write_vk_json,
    write_wtns,
    write_zkey,
)
from engine.prover.verify import InvalidProof, verify
from tests.oracle import snarkjs as oracle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
CURVES = ["bn128", "bls12381"]


def _fixture(curve: str):
    d = FIXTURES / curve
    pk = read_zkey(d / "circuit.zkey")
    return d, pk, assignment_from_witness(pk, read_wtns(d / "witness.wtns", curve))


@pytest.mark.node
@pytest.mark.slow
@pytest.mark.parametrize("curve", CURVES)
def test_snarkjs_key_our_proof_verifies_everywhere(curve: str, tmp_path: Path) -> None:
    oracle.require_snarkjs()
    d, pk, asg = _fixture(curve)
    proof = prove(pk, asg)
    pub = public_inputs_of(asg)
    assert pub == read_public_json(d / "public.json")
    assert verify(pk.vk, proof, pub)
    write_proof_json(tmp_path / "proof.json", proof)
    write_public_json(tmp_path / "public.json", pub)
    assert oracle.groth16_verify(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")
    # snarkjs's own proof, committed with the fixture, passes our verifier
    vk = read_vk_json(d / "verification_key.json")
    assert verify(vk, read_proof_json(d / "proof.json"), pub)


@pytest.mark.node
@pytest.mark.slow
@pytest.mark.parametrize("curve", CURVES)
def test_our_setup_interoperates_with_snarkjs(curve: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A circom-free circuit: R1CS built here, keys from our setup, proved by us and by snarkjs."""
    oracle.require_snarkjs()
    r1cs, w = synthetic_circuit(curve, 150, n_public=3, seed=5)
    with caplog.at_level("WARNING"):
        pk, vk = setup(r1cs, seed="test")
    assert DEV_SETUP_NOTICE in caplog.text and "not a ceremony" in DEV_SETUP_NOTICE
    write_r1cs(tmp_path / "c.r1cs", r1cs)
    write_zkey(tmp_path / "c.zkey", pk)
    write_wtns(tmp_path / "w.wtns", curve, w)
    write_vk_json(tmp_path / "vk.json", vk)
    # snarkjs exports the same verification key from our .zkey
    res = oracle.run("zkey", "export", "verificationkey", tmp_path / "c.zkey", tmp_path / "vk_snarkjs.json")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "vk_snarkjs.json").read_text()) == json.loads((tmp_path / "vk.json").read_text())
    # our proof -> snarkjs verify
    asg = assignment_from_r1cs(r1cs, w)
    proof = prove(pk, asg)
    write_proof_json(tmp_path / "p.json", proof)
    write_public_json(tmp_path / "pub.json", public_inputs_of(asg))
    assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "pub.json", tmp_path / "p.json")
    # snarkjs proves with our zkey -> both verifiers accept
    res = oracle.run(
        "groth16", "prove", tmp_path / "c.zkey", tmp_path / "w.wtns", tmp_path / "sp.json", tmp_path / "spub.json"
    )
    assert res.returncode == 0, res.stderr
    assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "spub.json", tmp_path / "sp.json")
    assert verify(vk, read_proof_json(tmp_path / "sp.json"), read_public_json(tmp_path / "spub.json"))
    # and a tampered proof is refused by snarkjs too
    bad = proof._replace(pi_a=proof.pi_c)
    write_proof_json(tmp_path / "bad.json", bad)
    assert not oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "pub.json", tmp_path / "bad.json")


@pytest.mark.parametrize("curve", CURVES)
def test_split_path_is_byte_identical(curve: str) -> None:
    _, pk, asg = _fixture(curve)
    r, s = 123456789, 987654321
    one = prove(pk, asg, r=r, s=s)
    pending = gpu_prove_start(pk, asg, "cpu", r=r, s=s)
    assert pending.abc_released and pending.release_abc() == asg.a.nbytes * 3 and pending.release_abc() == 0
    assert pending.retained_bytes >= asg.witness.nbytes
    two = gpu_prove_finish(pending)
    assert json.dumps(proof_to_json(one)) == json.dumps(proof_to_json(two))
    with pytest.raises(RuntimeError, match="twice"):
        gpu_prove_finish(pending)
    # fresh randomness gives a different, still valid proof (BLS: cheap to verify)
    other = prove(pk, asg)
    assert other != one
    if curve == "bls12381":
        assert verify(pk.vk, other, public_inputs_of(asg))


@pytest.mark.parametrize("stop_after", [0, 2, 4])
def test_an_abort_request_stops_the_proof_at_the_next_phase(stop_after: int) -> None:
    _, pk, asg = _fixture("bls12381")
    polls: list[int] = []

    def abort() -> bool:
        polls.append(1)
        return len(polls) > stop_after

    with pytest.raises(ProofAborted, match="abandoned before"):
        gpu_prove_start(pk, asg, "cpu", abort=abort)
    assert len(polls) == stop_after + 1  # no phase ran after the first "stop"


def test_an_abort_request_stops_the_finish_before_the_g2_msm() -> None:
    _, pk, asg = _fixture("bls12381")
    pending = gpu_prove_start(pk, asg, "cpu", abort=lambda: False)
    with pytest.raises(ProofAborted, match="B2 MSM"):
        gpu_prove_finish(pending, abort=lambda: True)
    assert verify(pk.vk, gpu_prove_finish(pending, abort=lambda: False), public_inputs_of(asg))


@pytest.mark.gpu
@pytest.mark.parametrize("curve", CURVES)
def test_cuda_proof_is_byte_identical(curve: str) -> None:
    from engine.prover.backends import cuda

    if not cuda.gpu_available():
        pytest.skip(f"no GPU: {cuda.gpu_unavailable_reason()}")
    r1cs, w = synthetic_circuit(curve, 3000, n_public=2, seed=1)
    pk, vk = setup(r1cs, seed=2)
    asg = assignment_from_r1cs(r1cs, w)
    cpu = prove(pk, asg, r=11, s=13)
    on_gpu = gpu_prove_finish(gpu_prove_start(pk, asg, "cuda:0", r=11, s=13))
    assert proof_to_json(on_gpu) == proof_to_json(cpu)
    assert verify(vk, on_gpu, public_inputs_of(asg))


@pytest.mark.parametrize("curve", CURVES)
def test_the_cuda_branch_on_the_emulated_grid_gives_the_cpu_proof(curve: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the device orchestration (bases kept per device, H left on the device for its MSM, the
    # C MSM over the private rows) run launch for launch on the host emulation of the kernels
    from engine.prover.backends import cuda
    from tests.prover.grid_emu import EmulatedGrid

    grid = EmulatedGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    r1cs, w = synthetic_circuit(curve, 200, n_public=2, seed=3)
    pk, vk = setup(r1cs, seed=4)
    asg = assignment_from_r1cs(r1cs, w)
    emulated = gpu_prove_finish(gpu_prove_start(pk, asg, "cuda:0", r=11, s=13))
    assert proof_to_json(emulated) == proof_to_json(prove(pk, asg, r=11, s=13))
    assert verify(vk, emulated, public_inputs_of(asg))


def test_rejections_bls() -> None:
    """Tampered proof, wrong public input, malformed points and inputs: False or InvalidProof."""
    _, pk, asg = _fixture("bls12381")
    c = get_curve("bls12381")
    proof = prove(pk, asg)
    pub = public_inputs_of(asg)
    vk = pk.vk
    assert verify(vk, proof, pub)
    assert not verify(vk, proof._replace(pi_c=proof.pi_a), pub)  # tampered (valid points)
    assert not verify(vk, proof, [pub[0], pub[1] + 1])  # wrong public input
    with pytest.raises(InvalidProof, match="not a field element"):
        verify(vk, proof, [pub[0], pub[1] + c.r])
    with pytest.raises(InvalidProof, match="expected 2 public inputs"):
        verify(vk, proof, pub[:1])
    assert proof.pi_a is not None and proof.pi_b is not None  # a real proof has no point at infinity
    x, y = proof.pi_a
    with pytest.raises(InvalidProof, match="pi_a: not on the BLS12-381 G1 curve"):
        verify(vk, proof._replace(pi_a=(x, (y + 1) % c.p)), pub)
    with pytest.raises(InvalidProof, match="not reduced"):
        verify(vk, proof._replace(pi_a=(x + c.p, y)), pub)
    (bx, by) = proof.pi_b
    with pytest.raises(InvalidProof, match="pi_b"):
        verify(vk, proof._replace(pi_b=(bx, (by[0], (by[1] + 1) % c.p))), pub)
    with pytest.raises(InvalidProof, match="over bn128"):
        verify(vk, proof._replace(curve="bn128"), pub)


def test_rejections_bn128() -> None:
    _, pk, asg = _fixture("bn128")
    c = get_curve("bn128")
    proof = prove(pk, asg)
    pub = public_inputs_of(asg)
    assert not verify(pk.vk, proof, [pub[0] + 1, pub[1]])
    assert proof.pi_c is not None and proof.pi_b is not None  # a real proof has no point at infinity
    x, y = proof.pi_c
    with pytest.raises(InvalidProof, match="pi_c: not on the BN254 G1 curve"):
        verify(pk.vk, proof._replace(pi_c=(x, (y + 1) % c.p)), pub)
    (bx, by) = proof.pi_b
    with pytest.raises(InvalidProof, match="pi_b: not on the BN254 G2"):
        verify(pk.vk, proof._replace(pi_b=(bx, (by[0], (by[1] + 1) % c.p))), pub)


@pytest.mark.parametrize("curve", CURVES)
def test_unsatisfied_witness_is_refused_before_proving(curve: str) -> None:
    r1cs, w = synthetic_circuit(curve, 40, n_public=2, seed=9)
    pk, _ = setup(r1cs, seed=1)
    bad = w.copy()
    bad[r1cs.n_vars - 7, 0] ^= np.uint64(1)  # a product t_i: breaks exactly constraint 40 - 7
    asg = assignment_from_r1cs(r1cs, bad)
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint 33 not satisfied$"):
        prove(pk, asg)
    with pytest.raises(UnsatisfiedConstraint, match="constraint 33"):
        gpu_prove_start(pk, asg, "cpu")
    # shape errors are ValueErrors with a reason, not crashes
    short = Assignment(curve=curve, witness=w[:-1], a=asg.a, b=asg.b, c=asg.c, n_public=2)
    with pytest.raises(ValueError, match="witness"):
        prove(pk, short)
    with pytest.raises(ValueError, match="unknown device"):
        gpu_prove_start(pk, assignment_from_r1cs(r1cs, w), "tpu:0")


def test_select_device() -> None:
    from engine.prover.backends import cuda
    from engine.prover.config import ProverConfig, current, using

    assert select_device("cpu") == "cpu"
    assert select_device("cuda:1") == "cuda:1"
    with using(current().but(device="auto")):
        assert select_device(None) == ("cuda:0" if cuda.gpu_available() else "cpu")
    with using(current().but(device="cpu")):
        assert select_device(None) == "cpu"
    assert ProverConfig.from_env({"PROVINGSITE_DEVICE": "cuda:3"}).device == "cuda:3"
    with pytest.raises(ValueError, match="unknown device"):
        select_device("gpu")


@pytest.mark.parametrize("curve", CURVES)
def test_our_setup_proof_verifies_without_node(curve: str) -> None:
    """Setup → prove → independent pairing check (arkworks / py_ecc), and the zkey round trip
    proves identically, so this holds on machines without the Node oracle too."""
    r1cs, w = synthetic_circuit(curve, 60, n_public=1, seed=3)
    pk, vk = setup(r1cs, seed=4)
    assert pk.provenance == DEV_SETUP_NOTICE
    asg = assignment_from_r1cs(r1cs, w)
    proof = prove(pk, asg, r=2, s=3)
    assert verify(vk, proof, public_inputs_of(asg))
    if curve == "bls12381":  # a BN254 check costs seconds in py_ecc; test_rejections_bn128 covers it
        assert not verify(vk, proof, [(public_inputs_of(asg)[0] + 1) % get_curve(curve).r])


def test_the_orchestration_and_the_cpu_backend_load_no_array_library() -> None:
    # the command line proves a mapped .zkey through them, and numpy alone costs it 70 ms
    code = ("import sys, engine.prover.groth16, engine.prover.backends.base, engine.prover.backends.cpu.backend;"
            "print(sorted(m for m in ('numpy', 'cupy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"
