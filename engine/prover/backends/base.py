"""The one interface Groth16's orchestration (engine.prover.groth16) proves through.

A backend is where a proof's heavy steps run: H on the coset and the five MSMs. The
orchestration asks a backend for a ``Launch`` per proof (or per batch of proofs of one key):
the launch owns whatever the proof holds on the backend's side (device copies of the witness
and of H), reports it in ``nbytes``, and gives it back on ``close``. Every MSM returns a
``Handle`` at once; ``wait`` gives its affine point. A backend that computes eagerly (the CPU)
returns handles that are already done; one with a stream (CUDA) returns them while the
device works, so the caller may go on and finish later.

Buffers cross this interface through the buffer protocol (bytes, memoryviews, numpy and CuPy
arrays), so this module, and the orchestration above it, import no array library.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

Buffer = Any  # bytes, a memoryview or an array: the kernels' layout (little-endian u64 limbs)
# a, b, c of one proof over the whole domain (std-form scalars, one row per domain point)
Evaluations = tuple[Buffer, Buffer, Buffer]

# The key's MSM sections, by the names ProvingKey gives them, and their groups.
SECTIONS = {"a_points": "g1", "b1_points": "g1", "b2_points": "g2", "c_points": "g1", "h_points": "g1"}


class Handle(Protocol):
    """One MSM in flight (or done): ``wait`` blocks until it is and returns the affine point."""

    def wait(self) -> Buffer: ...


class Ready:
    """A result computed before its handle was returned (an eager backend's MSM)."""

    __slots__ = ("value",)

    def __init__(self, value: Buffer) -> None:
        self.value = value

    def wait(self) -> Buffer:
        return self.value


class HostLaunch:
    """What a launch on the host shares: the caller's buffers are the backend's (the witness
    and H stay where they are, nothing is held apart), and a batch is its proofs one by one
    unless a subclass has a batch kernel. Subclasses give ``h_coset`` and ``msm``."""

    asynchronous = False

    @property
    def nbytes(self) -> int:
        return 0

    def h_coset(self, evals: Evaluations) -> Buffer:
        raise NotImplementedError

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle:
        raise NotImplementedError

    def h_coset_batch(self, evals: Iterable[Evaluations], k: int) -> Buffer:
        return [self.h_coset(e) for e in evals]

    def scalars(self, witness: Buffer) -> Buffer:
        return witness

    def scalars_batch(self, witnesses: Sequence[Buffer]) -> Buffer:
        return list(witnesses)

    def msm_batch(self, section: str, scalars: Buffer, first_row: int = 0) -> list[Handle]:
        return [self.msm(section, v, first_row) for v in scalars]

    def close(self) -> None:
        pass


class MappedKey(NamedTuple):
    """A proving key as buffers of the kernels' layout, read where they lie: a snarkjs .zkey's
    header points and sections (engine.prover.zkey_prover maps the file). No arrays, so the
    command line proves from it without numpy; a NamedTuple, not a dataclass, for the same
    command's start-up. ``entries``: section 4 after its count (the A and B coefficients, 44
    bytes each); ``mapped``: the buffers are views of a read-only file mapping, whose pages the
    kernels give back as they are done with each."""

    curve: str
    n_vars: int
    n_public: int
    domain_size: int
    alpha1: Buffer
    beta1: Buffer
    beta2: Buffer
    delta1: Buffer
    delta2: Buffer
    a_points: Buffer
    b1_points: Buffer
    b2_points: Buffer
    c_points: Buffer
    h_points: Buffer
    entries: Buffer
    n_coef: int
    mapped: bool = False

    @property
    def n_private(self) -> int:
        return self.n_vars - self.n_public - 1


class Launch(Protocol):
    """One proof's (or one batch's) work on a backend, over one key.

    Scalars and H live where the backend reads them: ``scalars`` and ``h_coset`` return the
    backend's own buffers, to be passed back to its ``msm``. ``first_row`` skips the first rows
    of the scalars (the C MSM runs over the private signals only).

    ``asynchronous``: its MSMs run after ``msm`` returns (on a device's stream, or queued until
    the first wait), so the orchestration launches all five (the G2 one included) at start and
    waits at finish; an eager launch runs the G2 MSM at finish instead, where the engine's
    finalizer takes it off the proving stage."""

    asynchronous: bool

    @property
    def nbytes(self) -> int:
        """Bytes this launch holds on the backend until ``close``."""
        ...

    def h_coset(self, evals: Evaluations) -> Buffer: ...

    def h_coset_batch(self, evals: Iterable[Evaluations], k: int) -> Buffer:
        """k proofs' H at once; ``evals`` is consumed one proof at a time."""
        ...

    def scalars(self, witness: Buffer) -> Buffer: ...

    def scalars_batch(self, witnesses: Sequence[Buffer]) -> Buffer: ...

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle: ...

    def msm_batch(self, section: str, scalars: Buffer, first_row: int = 0) -> list[Handle]:
        """One handle per vector of a ``scalars_batch`` (or ``h_coset_batch``) buffer."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    """A device that proves: ``launch`` opens one proof's work over ``key``."""

    name: str

    def launch(self, key: Any) -> Launch: ...
