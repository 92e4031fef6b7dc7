"""Groth16's prover, written once over the Backend protocol (engine.prover.backends.base).

A proof runs in phases: validate the statement, spread a, b, c over the domain, H on the
coset, the five MSMs (A, B1, C over the private signals and H in G1; B2 in G2), then the
proof assembled with r and s. ``abort`` is polled between phases: a native MSM cannot be
interrupted, but each phase is short next to a whole proof, so a cancelled partition frees
its memory within one phase.

The split is the engine's: gpu_prove_start launches the work and returns; gpu_prove_finish
waits for it and assembles. An asynchronous launch has all five MSMs launched when start
returns: on a CUDA device's stream, or (the CPU's over a mapped .zkey) queued to run on one
thread team at the first wait; an eager one (the CPU's over arrays) runs the G1 MSMs in start
and the G2 MSM in finish, where the engine's finalizer takes it off the proving stage. On an H200 the G2
MSM of a 2^20 proof takes 51 ms on the device against over a second on 16 cores, so the
device runs it with the others (bench/results/gpu.md). A batch of proofs of one key runs
each MSM once for all of them (one pass over the bases), the G2 one included.

The math is snarkjs's (docs/formats.md): a, b over the domain rows incl. the public-input rows,
c = a·b on the circuit rows, h = a·b − c on the odd coset, randomised with r and s.

What is proved is a key (a ProvingKey of arrays, or a MappedKey of a .zkey's buffers) and a
Statement: the witness, its check against the key and its a, b, c over the domain. The engine
hands in Assignments (engine.prover.statement, numpy's, loaded when one is); the command line
a .zkey's witness and coefficients (engine.prover.zkey_prover), and never loads numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from engine.prover.backends.base import Backend, Buffer, Evaluations, Handle, Launch, MappedKey
from engine.prover.backends.cpu import groth16_native
from engine.prover.datatypes import Proof, ProofAborted
from engine.prover.params.curves import get_curve

if TYPE_CHECKING:
    import numpy as np

    from engine.prover.formats.zkey import ZkeyConstraints
    from engine.prover.keys import ProvingKey
    from engine.prover.r1cs import R1CS, Assignment

    Key = ProvingKey | MappedKey

Abort = Callable[[], bool] | None
Randomness = list[tuple[int | None, int | None]]

__all__ = [
    "PendingProof", "Proof", "ProofAborted", "Staged", "Statement", "assignment_from_r1cs", "assignment_from_witness",
    "backend_for", "finish", "gpu_prove_finish", "gpu_prove_launch", "gpu_prove_launch_batch", "gpu_prove_stage",
    "gpu_prove_stage_batch", "gpu_prove_start", "gpu_prove_start_batch", "launch_staged", "prove", "prove_batch",
    "prove_raw", "public_inputs_of", "stage", "start",
]


def assignment_from_r1cs(r1cs: R1CS, witness: np.ndarray) -> Assignment:
    """A·w, B·w, C·w with the native sparse mat-vec (the proof then checks a·b == c)."""
    from engine.prover import statement

    return statement.assignment_from_r1cs(r1cs, witness)


def assignment_from_witness(pk: ProvingKey | ZkeyConstraints, witness: np.ndarray) -> Assignment:
    """For a snarkjs circuit known only by its .zkey: a, b from section 4, c = a·b (see
    statement.assignment_from_witness: a bad witness shows only when the proof is verified)."""
    from engine.prover import statement

    return statement.assignment_from_witness(pk, witness)


def check_satisfied(curve: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    from engine.prover.satisfied import check_satisfied as check

    check(curve, a, b, c)


def public_inputs_of(assignment: Assignment) -> list[int]:
    from engine.prover import statement

    return statement.public_inputs_of(assignment)


def _check(abort: Abort, phase: str) -> None:
    if abort is not None and abort():
        raise ProofAborted(f"proof abandoned before {phase}")


def backend_for(device: str) -> Backend:
    """The backend a device name selects: "cpu" or "cuda:N"."""
    if device == "cpu":
        from engine.prover.backends.cpu.backend import CpuBackend

        return CpuBackend()
    if device.startswith("cuda"):
        from engine.prover.backends.cuda_backend import CudaBackend

        _, _, idx = device.partition(":")
        try:
            return CudaBackend(int(idx or 0))
        except ValueError:
            raise ValueError(f"bad device {device!r}; expected 'cuda:N'") from None
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda:N'")


class Statement(Protocol):
    """What a proof proves: ``witness`` (the kernels' layout, one row per signal) and its
    evaluations. ``validate`` raises for a witness that does not fit or satisfy the key;
    ``evaluations`` gives a, b, c over the key's domain (std form) for H."""

    witness: Buffer
    abc_nbytes: int  # what the caller holds of a, b, c, released once H is made

    def validate(self, key: Any) -> None: ...

    def evaluations(self, key: Any) -> Evaluations: ...


class PendingProof:
    """A proof between start and finish.

    abc_released is True once start no longer holds the a/b/c evaluations (always, when
    start returns: the engine may release their share of memory then). retained_bytes is
    what this object still keeps until finish: the witness and its share of what the
    backend holds for it (a batch's proofs share one launch).

    A plain class, not a dataclass: the command line proves through here, and importing
    dataclasses (inspect, ast) is 10 ms of a small proof's whole command.
    """

    def __init__(self, pk: Key, device: str, witness: Buffer, r: int, s: int, abc_nbytes: int) -> None:
        self.pk, self.device, self.witness, self.abc_nbytes = pk, device, witness, abc_nbytes
        self.r, self.s = r, s  # the randomisers
        self.launch: Launch | None = None
        self.scalars: Buffer = None  # the witness where the backend's MSMs read it
        self.parts: dict[str, Handle] = {}  # "a", "b1", "c", "h", "b2": the MSMs launched
        self.launch_share = 1
        self.abc_released = False
        self.finished = False
        self._abc_returned = False

    def __repr__(self) -> str:
        return f"PendingProof({self.pk.curve}, {self.device}, finished={self.finished})"

    @property
    def retained_bytes(self) -> int:
        held = self.launch.nbytes // self.launch_share if self.launch is not None else 0
        return memoryview(self.witness).nbytes + held

    def release_abc(self) -> int:
        """Returns the bytes of a/b/c the caller may now release (idempotent: 0 the second time)."""
        if self.abc_released and not self._abc_returned:
            self._abc_returned = True
            return self.abc_nbytes
        return 0


def _pending(key: Key, statement: Statement, device: str, r: int | None, s: int | None) -> PendingProof:
    cp = get_curve(key.curve)
    return PendingProof(
        pk=key, device=device, witness=statement.witness,
        r=groth16_native.random_scalar(cp) if r is None else int(r) % cp.r,
        s=groth16_native.random_scalar(cp) if s is None else int(s) % cp.r,
        abc_nbytes=statement.abc_nbytes,
    )


def _launch_msms(launch: Launch, key: Key, w: Buffer, h: Buffer, abort: Abort, *, batch: bool,
                 with_g2: bool) -> dict[str, Any]:
    """The MSMs in their order, each after a poll of ``abort``: a handle each (a list of
    handles, one per proof, for a batch). C runs over the private signals only."""
    msm = launch.msm_batch if batch else launch.msm
    parts: dict[str, Any] = {}
    _check(abort, "the A MSM")
    parts["a"] = msm("a_points", w)
    _check(abort, "the B1 MSM")
    parts["b1"] = msm("b1_points", w)
    _check(abort, "the C MSM")
    if key.n_private:
        parts["c"] = msm("c_points", w, key.n_public + 1)
    _check(abort, "the H MSM")
    parts["h"] = msm("h_points", h)
    if with_g2:
        _check(abort, "the B2 MSM")
        parts["b2"] = msm("b2_points", w)
    return parts


class Staged:
    """A proof's host work, done before its launch: the statement checked against the key, its
    a, b, c spread over the domain and its witness, each where the backend uploads from
    (pinned host memory on a device; the buffers themselves on the CPU). What is left for the
    launch is the device's own work, which a device's lock serialises (the engine takes it
    only for ``launch``). A batch stages each proof alone; their launch is one.

    A plain class (see PendingProof)."""

    def __init__(self, key: Key, device: str, witness: Buffer, evaluations: Evaluations, r: int, s: int,
                 abc_nbytes: int, source_witness: Buffer) -> None:
        self.key, self.device, self.witness, self.evaluations = key, device, witness, evaluations
        self.r, self.s, self.abc_nbytes = r, s, abc_nbytes
        self.source_witness = source_witness  # the statement's own (what a pending proof keeps)


def stage(key: Key, statement: Statement, backend: Backend, *, r: int | None = None,
          s: int | None = None) -> Staged:
    """Everything a proof needs of the host before its launch (see Staged)."""
    statement.validate(key)
    pending = _pending(key, statement, backend.name, r, s)
    put = getattr(backend, "stage", None) or (lambda buffer: buffer)
    a, b, c = statement.evaluations(key)
    return Staged(key, backend.name, put(statement.witness), (put(a), put(b), put(c)), pending.r, pending.s,
                  statement.abc_nbytes, statement.witness)


def launch_staged(staged: Staged, backend: Backend, *, abort: Abort = None) -> PendingProof:
    """The device's work of a staged proof: H on the coset, the MSMs launched (the G2 one too on
    an asynchronous backend). ``abort`` is polled between phases."""
    key = staged.key
    pending = PendingProof(pk=key, device=staged.device, witness=staged.source_witness, r=staged.r, s=staged.s,
                           abc_nbytes=staged.abc_nbytes)
    _check(abort, "the H polynomial")
    launch = backend.launch(key)
    try:
        h = launch.h_coset(staged.evaluations)
        w = launch.scalars(staged.witness)
        pending.parts = _launch_msms(launch, key, w, h, abort, batch=False, with_g2=launch.asynchronous)
    except BaseException:
        launch.close()
        raise
    pending.launch, pending.scalars = launch, w
    pending.abc_released = True
    return pending


def start(key: Key, statement: Statement, backend: Backend, *, r: int | None = None, s: int | None = None,
          abort: Abort = None) -> PendingProof:
    """Validate, H on the coset, launch the MSMs (the G2 one too on an asynchronous backend).
    ``abort`` is polled between phases; when it turns true ProofAborted is raised and nothing
    of the proof is kept."""
    return launch_staged(stage(key, statement, backend, r=r, s=s), backend, abort=abort)


def finish(pending: PendingProof, *, abort: Abort = None) -> bytes:
    """Wait for the launched work (run the G2 MSM where start left it) and assemble: the proof
    as pi_a | pi_b | pi_c, affine Montgomery limbs (the zkey layout)."""
    if pending.finished:
        raise RuntimeError("gpu_prove_finish called twice for the same pending proof")
    launch = pending.launch
    assert launch is not None, "a pending proof is made by start"
    _check(abort, "the B2 MSM")
    if "b2" not in pending.parts:
        pending.parts["b2"] = launch.msm("b2_points", pending.scalars)
    points = {name: handle.wait() for name, handle in pending.parts.items()}
    launch.close()  # every kernel that read its buffers is done
    pending.finished = True
    pending.parts, pending.scalars = {}, None
    return _assemble(pending.pk, points, pending.r, pending.s)


def _assemble(key: Key, points: dict[str, Buffer], r: int, s: int) -> bytes:
    cp = get_curve(key.curve)
    ch = groth16_native.g1_add(cp, points["c"], points["h"]) if "c" in points else points["h"]
    return groth16_native.assemble(cp, points["a"], points["b1"], points["b2"], ch, key.alpha1, key.beta1, key.beta2,
                                   key.delta1, key.delta2, r, s)


def prove_raw(key: Key, statement: Statement, backend: Backend, *, r: int | None = None,
              s: int | None = None) -> bytes:
    """A whole proof, pi_a | pi_b | pi_c as finish gives it."""
    return finish(start(key, statement, backend, r=r, s=s))


def gpu_prove_start(
    pk: ProvingKey, assignment: Assignment, device: str = "cpu", *, r: int | None = None, s: int | None = None,
    abort: Abort = None,
) -> PendingProof:
    """Launch a proof of an Assignment on ``device`` ("cpu" or "cuda:N"); see start."""
    return gpu_prove_launch(gpu_prove_stage(pk, assignment, device, r=r, s=s), abort=abort)


def gpu_prove_stage(pk: ProvingKey, assignment: Assignment, device: str = "cpu", *, r: int | None = None,
                    s: int | None = None) -> Staged:
    """An Assignment's host work before its launch on ``device`` (see Staged)."""
    from engine.prover.statement import ArrayStatement

    return stage(pk, ArrayStatement(assignment), backend_for(device), r=r, s=s)


def gpu_prove_launch(staged: Staged, *, abort: Abort = None) -> PendingProof:
    """The launch of a staged proof (see launch_staged)."""
    return launch_staged(staged, backend_for(staged.device), abort=abort)


def gpu_prove_finish(pending: PendingProof, *, abort: Abort = None) -> Proof:
    """Wait for the launched work and assemble the proof; ``abort`` as in gpu_prove_start."""
    raw = finish(pending, abort=abort)
    return groth16_native.proof_from_bytes(get_curve(pending.pk.curve), raw)


def gpu_prove_start_batch(
    pk: ProvingKey, assignments: list[Assignment], device: str = "cpu", *,
    randomness: Randomness | None = None, abort: Abort = None,
) -> list[PendingProof]:
    """Launch k proofs of the same key at once: one pending proof per assignment, each then
    finished alone by gpu_prove_finish (and byte-identical to gpu_prove_start's proof of the
    same assignment and r, s). Each of the five MSMs (the G2 one included, so finish only
    assembles) is one pass over the key's bases for the k scalar vectors: the CPU's batch
    kernels, or one launch sequence on a device's stream. ``randomness``: an (r, s) per
    assignment, None for fresh ones."""
    return gpu_prove_launch_batch(gpu_prove_stage_batch(pk, assignments, device, randomness=randomness), abort=abort)


def gpu_prove_stage_batch(pk: ProvingKey, assignments: list[Assignment], device: str = "cpu", *,
                          randomness: Randomness | None = None) -> list[Staged]:
    """Each proof of a batch staged alone (see Staged): their launch is one."""
    rs = randomness if randomness is not None else [(None, None)] * len(assignments)
    if len(rs) != len(assignments):
        raise ValueError(f"{len(assignments)} assignments but {len(rs)} (r, s) pairs")
    return [gpu_prove_stage(pk, asg, device, r=r, s=s) for asg, (r, s) in zip(assignments, rs, strict=True)]


def gpu_prove_launch_batch(staged: list[Staged], *, abort: Abort = None) -> list[PendingProof]:
    """One launch for staged proofs of one key (see gpu_prove_start_batch)."""
    if len(staged) == 1:
        return [gpu_prove_launch(staged[0], abort=abort)]
    pk, backend = staged[0].key, backend_for(staged[0].device)
    pendings = [PendingProof(pk=pk, device=st.device, witness=st.source_witness, r=st.r, s=st.s,
                             abc_nbytes=st.abc_nbytes) for st in staged]
    _check(abort, "the H polynomials")
    launch = backend.launch(pk)
    try:
        h = launch.h_coset_batch((st.evaluations for st in staged), len(staged))
        w = launch.scalars_batch([st.witness for st in staged])
        rows = _launch_msms(launch, pk, w, h, abort, batch=True, with_g2=True)
    except BaseException:
        launch.close()
        raise
    for v, p in enumerate(pendings):
        p.launch, p.launch_share = launch, len(pendings)
        p.parts = {name: handles[v] for name, handles in rows.items()}
        p.abc_released = True
    return pendings


def prove_batch(
    pk: ProvingKey, assignments: list[Assignment], *, device: str = "cpu", randomness: Randomness | None = None,
) -> list[Proof]:
    return [gpu_prove_finish(p) for p in gpu_prove_start_batch(pk, assignments, device, randomness=randomness)]


def prove(
    pk: ProvingKey, assignment: Assignment, *, device: str = "cpu", r: int | None = None, s: int | None = None
) -> Proof:
    return gpu_prove_finish(gpu_prove_start(pk, assignment, device, r=r, s=s))
