"""The GPU's batched MSM (k scalar vectors over the same bases in one launch sequence) and the
batched proofs it makes on a device, run on the host emulation of the kernels: each vector
gets exactly its own CPU MSM, and a batch of proofs on the device is byte-identical with the
CPU's batch of the same witnesses and r, s."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.prover.backends import cuda
from engine.prover.backends.cpu import native
from engine.prover.groth16 import (
    assignment_from_r1cs,
    gpu_prove_finish,
    gpu_prove_start_batch,
    prove_batch,
    public_inputs_of,
)
from engine.prover.params.curves import CURVES, fr_to_limbs
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.snarkjs import proof_to_json
from engine.prover.verify import verify
from tests.prover.grid_emu import EmulatedGrid
from tests.prover.test_gpu_kernels import random_scalars, witness_like

CURVE_NAMES = sorted(CURVES)


class CountingGrid(EmulatedGrid):
    """The emulated grid, counting its launches by kernel name."""

    def __init__(self) -> None:
        super().__init__()
        self.launches: Counter[str] = Counter()

    def _launch(self, name: str, threads: int, *args: Any) -> None:
        self.launches[name] += 1
        super()._launch(name, threads, *args)


@pytest.fixture(scope="module")
def grid() -> CountingGrid:
    return CountingGrid()


def vector(kind: str, curve: str, n: int, seed: int) -> np.ndarray:
    c = CURVES[curve]
    if kind == "witness":  # mostly 0 and 1: nearly every entry in one bucket of window 0
        return witness_like(c, n, seed)
    if kind == "zero":
        return np.zeros((n, 4), np.uint64)
    if kind == "equal":  # every entry in the same bucket of every window
        return fr_to_limbs([c.r - 2 - seed] * n)
    return random_scalars(c, n, seed)


def bases_of(curve: str, group: str, n: int) -> np.ndarray:
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, random_scalars(CURVES[curve], n, 7))
    if n > 2:
        bases[2] = 0  # the point at infinity among the bases
    return bases


def batched(grid: cuda.Grid, curve: str, group: str, bases: np.ndarray, vectors: np.ndarray) -> list[np.ndarray]:
    rows = getattr(grid, f"msm_{group}_batch_async")(curve, grid.upload_bases(bases), vectors)
    return [row.wait() for row in rows]


def one_by_one_on_cpu(curve: str, group: str, bases: np.ndarray, vectors: np.ndarray) -> list[np.ndarray]:
    return [getattr(native, f"msm_{group}")(curve, bases, v) for v in vectors]


@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize(("n", "kinds"), [
    (1, ("random",)),
    (37, ("witness", "random")),
    (37, ("zero", "equal", "random")),
    (1000, ("witness",)),
    (1000, ("witness", "zero")),
    (1000, ("equal", "witness", "random")),
    (2500, ("witness", "random", "witness")),
])
def test_each_vector_of_a_batch_gets_its_own_msm(dev: cuda.Grid, curve: str, group: str, n: int,
                                                 kinds: tuple[str, ...]) -> None:
    bases = bases_of(curve, group, n)
    vectors = np.stack([vector(kind, curve, n, seed) for seed, kind in enumerate(kinds)])
    got = batched(dev, curve, group, bases, vectors)
    assert len(got) == len(kinds)
    for mine, want in zip(got, one_by_one_on_cpu(curve, group, bases, vectors), strict=True):
        assert np.array_equal(mine, want)


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_two_equal_vectors_of_a_batch_give_equal_points_and_a_batch_of_one_the_single_msm(
        dev: cuda.Grid, curve: str) -> None:
    # equal vectors fill equal buckets of different vectors: nothing of one may reach the other
    n = 300
    bases = bases_of(curve, "g1", n)
    v = vector("random", curve, n, 1)
    twice = batched(dev, curve, "g1", bases, np.stack([v, v]))
    alone = dev.msm_g1(curve, bases, v)
    assert np.array_equal(twice[0], twice[1]) and np.array_equal(twice[0], alone)
    assert np.array_equal(batched(dev, curve, "g1", bases, v[None])[0], alone)


def test_a_batch_is_one_launch_sequence(grid: CountingGrid) -> None:
    curve, n = "bn128", 500
    bases = bases_of(curve, "g1", n)
    vectors = np.stack([vector("random", curve, n, s) for s in range(3)])
    grid.launches.clear()
    batched(grid, curve, "g1", bases, vectors)
    assert grid.launches["bn128_g1_k_digits"] == 1
    assert grid.launches["bn128_g1_k_segments"] == 1


def test_a_batch_past_the_bucket_ids_is_split_and_still_exact() -> None:
    # a launch sequence's k nwin half bucket ids share a key's 32 bits; here fewer are allowed
    split = CountingGrid()
    curve, n = "bls12381", 200
    nwin_half = ((256 + split.window(n)) // split.window(n)) << (split.window(n) - 1)
    split.bucket_ids = 2 * nwin_half
    assert split.batch_limit(n) == 2
    bases = bases_of(curve, "g2", n)
    vectors = np.stack([vector(kind, curve, n, s) for s, kind in enumerate(("random", "witness", "random"))])
    got = batched(split, curve, "g2", bases, vectors)
    assert split.launches["bls12381_g2_k_digits"] == 2  # vectors 0-1, then 2
    for mine, want in zip(got, one_by_one_on_cpu(curve, "g2", bases, vectors), strict=True):
        assert np.array_equal(mine, want)


def test_the_batch_rejects_scalars_of_another_length(grid: CountingGrid) -> None:
    bases = bases_of("bn128", "g1", 10)
    with pytest.raises(ValueError, match=r"\(k, 10, 4\)"):
        grid.msm_g1_batch_async("bn128", grid.upload_bases(bases), np.zeros((2, 9, 4), np.uint64))


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_a_batch_of_proofs_on_the_emulated_device_is_the_cpu_batch(curve: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the device branch of gpu_prove_start_batch, launch for launch on the host emulation:
    # each proof's H on the device, then one launch sequence per MSM kind for all three proofs
    grid = CountingGrid()
    monkeypatch.setattr(cuda, "get_device", lambda index=0: grid)
    r1cs, w0 = synthetic_circuit(curve, 120, n_public=2, seed=0)
    pk, vk = setup(r1cs, seed=5)
    witnesses = [w0] + [synthetic_circuit(curve, 120, n_public=2, seed=s)[1] for s in (1, 2)]
    asgs = [assignment_from_r1cs(r1cs, w) for w in witnesses]
    rs = [(21 + k, 43 + k) for k in range(3)]
    pendings = gpu_prove_start_batch(pk, asgs, "cuda:0", randomness=list(rs))
    assert all(p.abc_released and p.launch is not None and len(p.parts) == 5 for p in pendings)
    pre = f"{curve}_g1"
    assert grid.launches[f"{pre}_k_digits"] == 4 and grid.launches[f"{curve}_g2_k_digits"] == 1  # A, B1, C, H; B2
    on_device = {k: gpu_prove_finish(pendings[k]) for k in (1, 2, 0)}  # each finished alone, out of order
    on_cpu = prove_batch(pk, asgs, randomness=list(rs))
    for k, asg in enumerate(asgs):
        assert json.dumps(proof_to_json(on_device[k])) == json.dumps(proof_to_json(on_cpu[k]))
        assert verify(vk, on_device[k], public_inputs_of(asg))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 700), kinds=st.lists(st.sampled_from(["witness", "random", "zero", "equal"]), min_size=1,
                                              max_size=4), seed=st.integers(0, 2**32))
def test_any_batch_of_any_size_gets_each_vector_its_own_msm(grid: CountingGrid, n: int, kinds: list[str],
                                                            seed: int) -> None:
    # G1 of bn128 only, the cheapest to emulate; the sizes and vectors drawn
    curve = "bn128"
    bases = native.g1_mul_generator_batch(curve, random_scalars(CURVES[curve], n, seed))
    vectors = np.stack([vector(kind, curve, n, seed + v) for v, kind in enumerate(kinds)])
    got = batched(grid, curve, "g1", bases, vectors)
    for mine, want in zip(got, one_by_one_on_cpu(curve, "g1", bases, vectors), strict=True):
        assert np.array_equal(mine, want)


@pytest.mark.gpu
@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_a_batch_of_proofs_on_a_real_device_is_the_cpu_batch(curve: str) -> None:
    # the witnesses and H as device arrays (the batch MSM's on-device path), at a size past the emulation's
    if not cuda.gpu_available():
        pytest.skip(f"no GPU: {cuda.gpu_unavailable_reason()}")
    r1cs, w0 = synthetic_circuit(curve, 3000, n_public=2, seed=0)
    pk, vk = setup(r1cs, seed=6)
    asgs = [assignment_from_r1cs(r1cs, w) for w in
            [w0] + [synthetic_circuit(curve, 3000, n_public=2, seed=s)[1] for s in (1, 2, 3)]]
    rs = [(5 + k, 7 + k) for k in range(4)]
    on_device = [gpu_prove_finish(p) for p in gpu_prove_start_batch(pk, asgs, "cuda:0", randomness=list(rs))]
    on_cpu = prove_batch(pk, asgs, randomness=list(rs))
    for mine, want, asg in zip(on_device, on_cpu, asgs, strict=True):
        assert json.dumps(proof_to_json(mine)) == json.dumps(proof_to_json(want))
        assert verify(vk, mine, public_inputs_of(asg))
