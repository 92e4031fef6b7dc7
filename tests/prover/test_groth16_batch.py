"""A batch of proofs of one key (gpu_prove_start_batch): the batch MSM kernels give each scalar
vector exactly the single MSM's point, so each proof of a batch is byte-identical to the
unbatched proof of the same witness and r, s, and verifies alone (our verifier, and snarkjs
where Node is installed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.prover.backends.cpu import fixed_base, native
from engine.prover.groth16 import (
    assignment_from_r1cs,
    gpu_prove_finish,
    gpu_prove_start_batch,
    prove,
    prove_batch,
    public_inputs_of,
)
from engine.prover.params.curves import get_curve
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.snarkjs import proof_to_json, write_proof_json, write_public_json, write_vk_json
from engine.prover.verify import verify
from tests.oracle import snarkjs as oracle

CURVES = ["bn128", "bls12381"]


def _four_partitions(curve: str, constraints: int = 40):
    """One key and four witnesses of its circuit (the synthetic circuit's shape depends only on
    its size, so other seeds are other partitions of the same circuit)."""
    r1cs, w0 = synthetic_circuit(curve, constraints, n_public=2, seed=0)
    pk, vk = setup(r1cs, seed="batch")
    witnesses = [w0] + [synthetic_circuit(curve, constraints, n_public=2, seed=k)[1] for k in (1, 2, 3)]
    return pk, vk, [assignment_from_r1cs(r1cs, w) for w in witnesses]


def _limbs(values: list[int]) -> np.ndarray:
    return np.array([[(v >> (64 * i)) & (2**64 - 1) for i in range(4)] for v in values], dtype=np.uint64)


@pytest.mark.parametrize("curve", CURVES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("n", [3, 200, 2500])
def test_the_batch_msm_gives_each_vector_its_own_msm(curve: str, group: str, n: int) -> None:
    rng = np.random.default_rng(n)
    r = get_curve(curve).r
    ks = [int.from_bytes(rng.bytes(40), "little") % r for _ in range(n)]
    ks[0] = 0  # a point at infinity among the bases
    make = native.g1_mul_generator_batch if group == "g1" else native.g2_mul_generator_batch
    bases = make(curve, _limbs(ks))
    vectors = np.stack([_limbs([int.from_bytes(rng.bytes(40), "little") % r for _ in range(n)]) for _ in range(4)])
    vectors[1] = 0  # an all-zero vector's MSM is the point at infinity
    batch = (native.msm_g1_batch if group == "g1" else native.msm_g2_batch)(curve, bases, vectors)
    single = native.msm_g1 if group == "g1" else native.msm_g2
    for v in range(4):
        assert np.array_equal(batch[v], single(curve, bases, vectors[v]))


@pytest.mark.parametrize("curve", CURVES)
@pytest.mark.parametrize("tables", [False, True])
def test_a_batch_of_four_proves_four_proofs_byte_identical_with_unbatched_ones(curve: str, tables: bool) -> None:
    pk, vk, asgs = _four_partitions(curve)
    if tables:
        fixed_base.precompute(pk)  # the engine's keys: the MSMs run through the shifted-copies tables
    rs = [(11 + k, 97 + k) for k in range(4)]
    batched = prove_batch(pk, asgs, randomness=list(rs))
    alone = [prove(pk, asg, r=r, s=s) for asg, (r, s) in zip(asgs, rs, strict=True)]
    assert len({json.dumps(proof_to_json(p)) for p in batched}) == 4
    for b, a, asg in zip(batched, alone, asgs, strict=True):
        assert json.dumps(proof_to_json(b)) == json.dumps(proof_to_json(a))
        assert verify(vk, b, public_inputs_of(asg))


def test_each_pending_proof_of_a_batch_finishes_alone() -> None:
    pk, vk, asgs = _four_partitions("bls12381")
    pendings = gpu_prove_start_batch(pk, asgs)
    assert all(p.abc_released for p in pendings)
    # finished out of order: each pending proof holds its own results
    proofs = {k: gpu_prove_finish(pendings[k]) for k in (2, 0, 3, 1)}
    for k, asg in enumerate(asgs):
        assert verify(vk, proofs[k], public_inputs_of(asg))
    with pytest.raises(ValueError, match="r, s"):
        gpu_prove_start_batch(pk, asgs, randomness=[(1, 2)])


@pytest.mark.node
@pytest.mark.slow
def test_batched_proofs_verify_with_snarkjs(tmp_path: Path) -> None:
    oracle.require_snarkjs()
    pk, vk, asgs = _four_partitions("bn128")
    write_vk_json(tmp_path / "vk.json", vk)
    for k, (proof, asg) in enumerate(zip(prove_batch(pk, asgs), asgs, strict=True)):
        write_proof_json(tmp_path / f"p{k}.json", proof)
        write_public_json(tmp_path / f"pub{k}.json", public_inputs_of(asg))
        assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / f"pub{k}.json", tmp_path / f"p{k}.json")
