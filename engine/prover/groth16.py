"""The Groth16 prover, split the way the engine drives a GPU.

gpu_prove_start: H polynomial (iNTT, coset NTT; native or GPU) and the MSMs. On "cuda:N" all
five (A, B1, C, H in G1 and B2 in G2) are launched on the device's stream and start returns
at once; on "cpu" the G1 MSMs run in start and the G2 MSM in finish. After start the a/b/c
evaluations are no longer referenced.
gpu_prove_finish: waits for the device (or runs the CPU's G2 MSM) and assembles the proof with
r, s. On an H200 the G2 MSM of a 2^20 proof takes 51 ms on the device against over a second
on 16 cores, and left on the host it made the finishing stage the pipeline's bottleneck
(bench/results/gpu.md).

The math is snarkjs's (SNARKJS.md): a, b over the domain rows incl. the public-input rows,
c = a·b on the circuit rows, h = a·b − c on the odd coset, randomised with r and s.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.prover.backends.cpu import fixed_base, groth16_native, native
from engine.prover.datatypes import Proof, ProofAborted, ProvingKey
from engine.prover.params.curves import get_curve, limbs_to_ints
from engine.prover.r1cs import R1CS, Assignment, starts_with_one
from engine.prover.satisfied import check_satisfied

if TYPE_CHECKING:
    from engine.prover.formats.zkey import ZkeyConstraints

Abort = Callable[[], bool] | None


def _check(abort: Abort, phase: str) -> None:
    # Between phases only: a native MSM cannot be interrupted, but each phase is short next
    # to a whole proof, so a cancelled partition frees its memory within one phase.
    if abort is not None and abort():
        raise ProofAborted(f"proof abandoned before {phase}")


def _fr_vec(values: np.ndarray, name: str, rows: int | None = None) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4 or (rows is not None and a.shape[0] != rows):
        raise ValueError(f"{name}: expected uint64 array of shape ({rows if rows is not None else 'n'}, 4), got {a.dtype} {a.shape}")
    return np.ascontiguousarray(a)


def assignment_from_r1cs(r1cs: R1CS, witness: np.ndarray) -> Assignment:
    """A·w, B·w, C·w with the native sparse mat-vec (prove() then checks a·b == c)."""
    w = _fr_vec(witness, "witness", r1cs.n_vars)
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    ev = [native.sparse_matvec(r1cs.curve, m.row_ptr, m.cols, m.coeffs, w) for m in (r1cs.a, r1cs.b, r1cs.c)]
    return Assignment(curve=r1cs.curve, witness=w, a=ev[0], b=ev[1], c=ev[2], n_public=r1cs.n_public)


def assignment_from_witness(pk: ProvingKey | ZkeyConstraints, witness: np.ndarray) -> Assignment:
    """For a snarkjs circuit known only by its .zkey: a, b from section 4, c = a·b.

    The zkey has no C matrix, so this cannot tell whether the witness satisfies the circuit;
    a bad witness gives a proof that fails verification (the prove command checks that).
    """
    w = _fr_vec(witness, "witness")
    if w.shape[0] != pk.n_vars:
        raise ValueError(f"witness has {w.shape[0]} values, the proving key expects {pk.n_vars}")
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    n = pk.n_constraints
    ev = []
    for m in (pk.a_matrix, pk.b_matrix):
        rp = m.row_ptr[: n + 1]
        k = int(rp[-1])
        ev.append(native.sparse_matvec(pk.curve, rp, m.cols[:k], m.coeffs[:k], w))
    c = native.fr_mul(pk.curve, ev[0], ev[1]) if n else np.zeros((0, 4), np.uint64)
    return Assignment(curve=pk.curve, witness=w, a=ev[0], b=ev[1], c=c, n_public=pk.n_public)


def _domain_evals(pk: ProvingKey, asg: Assignment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b, c over the whole domain: circuit rows, then one A row per public signal (and the 1)."""
    n, N, P = pk.n_constraints, pk.domain_size, pk.n_public + 1
    a = np.zeros((N, 4), np.uint64)
    b = np.zeros((N, 4), np.uint64)
    c = np.zeros((N, 4), np.uint64)
    a[:n], b[:n], c[:n] = asg.a, asg.b, asg.c
    a[n : n + P] = asg.witness[:P]
    return a, b, c


def _validate(pk: ProvingKey, asg: Assignment) -> None:
    if asg.curve != pk.curve:
        raise ValueError(f"assignment is over {asg.curve}, the proving key over {pk.curve}")
    _fr_vec(asg.witness, "witness", pk.n_vars)
    if asg.n_public != pk.n_public:
        raise ValueError(f"assignment has {asg.n_public} public signals, the proving key {pk.n_public}")
    for name in ("a", "b", "c"):
        _fr_vec(getattr(asg, name), name, pk.n_constraints)
    w = asg.witness
    if not starts_with_one(w):
        raise ValueError("witness[0] must be 1")
    check_satisfied(pk.curve, asg.a, asg.b, asg.c)


_device_bases: weakref.WeakKeyDictionary[ProvingKey, dict[tuple[int, str], Any]] = weakref.WeakKeyDictionary()
_bases_lock = threading.Lock()


def _cuda_index(device: str) -> int:
    _, _, idx = device.partition(":")
    try:
        return int(idx or 0)
    except ValueError:
        raise ValueError(f"bad device {device!r}; expected 'cuda:N'") from None


def _bases_on(pk: ProvingKey, dev: Any) -> dict[str, Any]:
    """The key's bases uploaded once per device and kept while the key lives."""
    with _bases_lock:
        per_key = _device_bases.setdefault(pk, {})
        out: dict[str, Any] = {}
        for name, arr in (("a", pk.a_points), ("b1", pk.b1_points), ("b2", pk.b2_points), ("c", pk.c_points),
                          ("h", pk.h_points)):
            key = (dev.index, name)
            if key not in per_key and arr.shape[0]:
                per_key[key] = dev.upload_bases(arr)
            out[name] = per_key.get(key)
        return out


@dataclass(eq=False)
class _CudaHandle:
    """The MSMs in flight on one device's stream (cuda.PendingResult each)."""

    parts: dict[str, Any]
    keep: list[Any]

    def wait(self, curve: str) -> dict[str, np.ndarray]:
        res = {k: v.wait() for k, v in self.parts.items()}
        self.keep.clear()
        zero = np.zeros_like(res["a"])
        c = native.g1_add_affine(curve, res.get("c", zero), res["h"])
        return {"a": res["a"], "b1": res["b1"], "b2": res["b2"], "c": c}


def _cuda_start(pk: ProvingKey, w: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, device: str) -> _CudaHandle:
    from engine.prover.backends import cuda

    dev = cuda.get_device(_cuda_index(device))
    bases = _bases_on(pk, dev)
    keep: list[Any] = []
    h_dev = dev.h_coset_dev(pk.curve, a, b, c, None, keep)
    w_dev = dev.upload(w, keep)
    parts = {
        "a": dev.msm_g1_async(pk.curve, bases["a"], w_dev),
        "b1": dev.msm_g1_async(pk.curve, bases["b1"], w_dev),
        "b2": dev.msm_g2_async(pk.curve, bases["b2"], w_dev),
        "h": dev.msm_g1_async(pk.curve, bases["h"], h_dev),
    }
    if pk.n_private:
        parts["c"] = dev.msm_g1_async(pk.curve, bases["c"], w_dev[pk.n_public + 1 :])
    return _CudaHandle(parts=parts, keep=keep)


def _cuda_start_batch(pk: ProvingKey, assignments: list[Assignment], device: str) -> list[_CudaHandle]:
    """k proofs' MSMs on the device, one launch sequence per MSM kind for all k (the batch MSM
    puts the vector in each bucket id), after each proof's H on the device as _cuda_start does."""
    from engine.prover.backends import cuda

    dev = cuda.get_device(_cuda_index(device))
    bases = _bases_on(pk, dev)
    curve, k = pk.curve, len(assignments)
    # one proof's domain evaluations on the host at a time: uploaded, then dropped
    evals = (_domain_evals(pk, asg) for asg in assignments)
    keep: list[Any] = []
    h_dev = dev.h_coset_batch_dev(curve, pk.domain_size, evals, k, keep)
    w_dev = dev.upload(np.stack([asg.witness for asg in assignments]), keep)
    rows = {
        "a": dev.msm_g1_batch_async(curve, bases["a"], w_dev),
        "b1": dev.msm_g1_batch_async(curve, bases["b1"], w_dev),
        "b2": dev.msm_g2_batch_async(curve, bases["b2"], w_dev),
        "h": dev.msm_g1_batch_async(curve, bases["h"], h_dev),
    }
    if pk.n_private:
        rows["c"] = dev.msm_g1_batch_async(curve, bases["c"], w_dev[:, pk.n_public + 1 :])
    # the handles share keep: any one's wait waits every batch MSM, the last launches on the stream
    return [_CudaHandle(parts={name: r[v] for name, r in rows.items()}, keep=keep) for v in range(k)]


@dataclass(eq=False)
class PendingProof:
    """A proof between start and finish.

    abc_released is True once start no longer holds the a/b/c evaluations (always, when
    start returns: the engine may release their share of memory then). retained_bytes is
    what this object still keeps until finish (the witness and device buffers).
    """

    pk: ProvingKey
    device: str
    witness: np.ndarray
    r: int
    s: int
    abc_nbytes: int
    abc_released: bool = False
    g1: dict[str, np.ndarray] = field(default_factory=dict)  # "a", "b1", "c" (incl. H): cpu results
    handle: Any = None  # cuda.py's async handle on cuda devices
    finished: bool = False
    _abc_returned: bool = False

    @property
    def retained_bytes(self) -> int:
        return int(self.witness.nbytes) + int(getattr(self.handle, "nbytes", 0) or 0)

    def release_abc(self) -> int:
        """Returns the bytes of a/b/c the caller may now release (idempotent: 0 the second time)."""
        if self.abc_released and not self._abc_returned:
            self._abc_returned = True
            return self.abc_nbytes
        return 0


def gpu_prove_start(
    pk: ProvingKey, assignment: Assignment, device: str = "cpu", *, r: int | None = None, s: int | None = None,
    abort: Abort = None,
) -> PendingProof:
    """Launch a proof. ``abort`` is polled between phases; when it turns true ProofAborted
    is raised and nothing of the proof is kept."""
    _validate(pk, assignment)
    curve = pk.curve
    cp = get_curve(curve)
    r_ = groth16_native.random_scalar(cp) if r is None else int(r) % cp.r
    s_ = groth16_native.random_scalar(cp) if s is None else int(s) % cp.r
    a, b, c = _domain_evals(pk, assignment)
    w = assignment.witness
    pending = PendingProof(
        pk=pk, device=device, witness=w, r=r_, s=s_,
        abc_nbytes=int(assignment.a.nbytes + assignment.b.nbytes + assignment.c.nbytes),
    )
    if device == "cpu":
        _check(abort, "the H polynomial")
        h = native.h_coset(curve, a, b, c)
        del a, b, c
        priv = w[pk.n_public + 1 :]
        _check(abort, "the A MSM")
        pa = fixed_base.msm(pk, "a_points", w)
        _check(abort, "the B1 MSM")
        pb1 = fixed_base.msm(pk, "b1_points", w)
        _check(abort, "the C MSM")
        pc = fixed_base.msm(pk, "c_points", priv) if priv.shape[0] else np.zeros_like(pa)
        _check(abort, "the H MSM")
        ph = fixed_base.msm(pk, "h_points", h)
        pending.g1 = {"a": pa, "b1": pb1, "c": native.g1_add_affine(curve, pc, ph)}
    elif device.startswith("cuda"):
        pending.handle = _cuda_start(pk, w, a, b, c, device)
        del a, b, c
    else:
        raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda:N'")
    pending.abc_released = True
    return pending


def gpu_prove_finish(pending: PendingProof, *, abort: Abort = None) -> Proof:
    """Wait for the launched work and assemble the proof; ``abort`` as in gpu_prove_start."""
    if pending.finished:
        raise RuntimeError("gpu_prove_finish called twice for the same pending proof")
    pk, curve, w = pending.pk, pending.pk.curve, pending.witness
    _check(abort, "the B2 MSM")
    if pending.handle is not None:
        g1 = pending.handle.wait(curve)
        pb2 = g1["b2"]
        pending.handle = None
    else:
        g1 = pending.g1
        # a batch start (gpu_prove_start_batch) made the G2 MSM with the others
        pb2 = g1["b2"] if "b2" in g1 else fixed_base.msm(pk, "b2_points", w)
    pending.finished = True
    raw = groth16_native.assemble(get_curve(curve), g1["a"], g1["b1"], pb2, g1["c"], pk.alpha1, pk.beta1, pk.beta2,
                                  pk.delta1, pk.delta2, pending.r, pending.s)
    pending.g1 = {}
    return groth16_native.proof_from_bytes(get_curve(curve), raw)


def gpu_prove_start_batch(
    pk: ProvingKey, assignments: list[Assignment], device: str = "cpu", *,
    randomness: list[tuple[int | None, int | None]] | None = None, abort: Abort = None,
) -> list[PendingProof]:
    """Launch k proofs of the same key at once: one pending proof per assignment, each then
    finished alone by gpu_prove_finish (and byte-identical to gpu_prove_start's proof of the
    same assignment and r, s). On "cpu" each of the five MSMs (the G2 one included, so finish
    only assembles) is one pass over the key's bases for the k scalar vectors
    (fixed_base.msm_batch); on a device likewise, each MSM kind one launch sequence on its
    stream for the k vectors (cuda.Grid.msm_g1_batch_async), after each proof's H there. ``randomness``: an (r, s) per assignment, None for fresh ones."""
    rs = randomness if randomness is not None else [(None, None)] * len(assignments)
    if len(rs) != len(assignments):
        raise ValueError(f"{len(assignments)} assignments but {len(rs)} (r, s) pairs")
    if len(assignments) == 1 or not (device == "cpu" or device.startswith("cuda")):
        # one proof, or a device gpu_prove_start names as unknown
        return [gpu_prove_start(pk, asg, device, r=r, s=s, abort=abort) for asg, (r, s) in zip(assignments, rs, strict=True)]
    cp = get_curve(pk.curve)
    pendings: list[PendingProof] = []
    for asg, (r, s) in zip(assignments, rs, strict=True):
        _validate(pk, asg)
        pendings.append(PendingProof(
            pk=pk, device=device, witness=asg.witness,
            r=groth16_native.random_scalar(cp) if r is None else int(r) % cp.r,
            s=groth16_native.random_scalar(cp) if s is None else int(s) % cp.r,
            abc_nbytes=int(asg.a.nbytes + asg.b.nbytes + asg.c.nbytes),
        ))
    if device.startswith("cuda"):
        _check(abort, "the device's H polynomials and MSMs")
        for p, handle in zip(pendings, _cuda_start_batch(pk, assignments, device), strict=True):
            p.handle = handle
            p.abc_released = True
        return pendings
    _check(abort, "the H polynomials")
    hs = []
    for asg in assignments:
        a, b, c = _domain_evals(pk, asg)
        hs.append(native.h_coset(pk.curve, a, b, c))
        del a, b, c
    ws = [asg.witness for asg in assignments]
    _check(abort, "the A MSMs")
    pa = fixed_base.msm_batch(pk, "a_points", ws)
    _check(abort, "the B1 MSMs")
    pb1 = fixed_base.msm_batch(pk, "b1_points", ws)
    _check(abort, "the C MSMs")
    privs = [w[pk.n_public + 1 :] for w in ws]
    pc = fixed_base.msm_batch(pk, "c_points", privs) if pk.n_private else [np.zeros_like(x) for x in pa]
    _check(abort, "the H MSMs")
    ph = fixed_base.msm_batch(pk, "h_points", hs)
    del hs
    _check(abort, "the B2 MSMs")
    pb2 = fixed_base.msm_batch(pk, "b2_points", ws)
    for i, p in enumerate(pendings):
        p.g1 = {"a": pa[i], "b1": pb1[i], "c": native.g1_add_affine(pk.curve, pc[i], ph[i]), "b2": pb2[i]}
        p.abc_released = True
    return pendings


def prove_batch(
    pk: ProvingKey, assignments: list[Assignment], *, device: str = "cpu",
    randomness: list[tuple[int | None, int | None]] | None = None,
) -> list[Proof]:
    return [gpu_prove_finish(p) for p in gpu_prove_start_batch(pk, assignments, device, randomness=randomness)]


def prove(
    pk: ProvingKey, assignment: Assignment, *, device: str = "cpu", r: int | None = None, s: int | None = None
) -> Proof:
    return gpu_prove_finish(gpu_prove_start(pk, assignment, device, r=r, s=s))


def public_inputs_of(assignment: Assignment) -> list[int]:
    p = assignment.public_inputs
    return limbs_to_ints(p) if p.shape[0] else []
