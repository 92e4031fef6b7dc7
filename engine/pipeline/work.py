"""A work item: the fixed facts of one claimed partition, and what it holds on this host.

Where its circuit comes from decides how its key is held (``CircuitSource``): a built-in
kind's and a registered circom circuit's key are cached once per host and shared by every
job of the circuit; a client's uploaded zkey is read per job, inside the job's own memory
reservation. Its memory needs are sized from the circuit itself (the built-in kinds) or
from the sizes the zkey declares (circom circuits), before anything is reserved.

The facts are set when the claim is loaded and never written again. What the item holds is
written by one stage each (tests/engine/test_one_writer_per_field.py reads the pipeline's
source to hold it so):

    state        the in-flight book, from engine.pipeline.lifecycle.step (InFlight.post)
    held         reserve: its key (and verifying key), memory reservation, shared blocks and
                 the synthesis process prepared for it
    synthesized  synthesize: the assignment (views over its blocks), public inputs, seconds
    launch       prove: the worker, the pending proof (whole, without split), seconds
    proof        finalize: what ``done`` records, seconds
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.ledger.claims import Claim
from engine.models import Partition
from engine.pipeline import keys
from engine.pipeline.lifecycle import ENDED, State
from engine.states import ProofKind

if TYPE_CHECKING:
    from engine.pipeline.handover import Blocks
    from engine.pipeline.memory import Reservation
    from engine.prover.r1cs import Assignment

ZKEY_NAME = "circuit.zkey"


class CircuitSource(enum.Enum):
    BUILTIN = "builtin"  # a built-in kind: synthesized here from the job's inputs
    REGISTERED = "registered"  # a circom circuit registered through the API: a witness per job
    UPLOADED = "uploaded"  # a client's own zkey and witness, uploaded with the job

    @classmethod
    def of(cls, kind: str, circuit_id: str) -> CircuitSource:
        if kind != ProofKind.CUSTOM:
            return cls.BUILTIN
        return cls.REGISTERED if keys.is_registered(circuit_id) else cls.UPLOADED

    @property
    def shares_key(self) -> bool:
        """The key comes from the host's key cache, shared by every job of the circuit."""
        return self is not CircuitSource.UPLOADED

    @property
    def client_witness(self) -> bool:
        """The witness is the client's, not synthesized here: a bad proof is its fault."""
        return self is not CircuitSource.BUILTIN


NO_DEADLINE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Sizes:
    """A partition's memory needs, from its circuit's real sizes (0 where they cannot be read:
    reading the key then fails the partition)."""

    key_bytes: int = 0
    abc_bytes: int = 0  # freed once its products are on the device: a/b/c and the H phase's working arrays
    partition_bytes: int = 0
    witness_rows: int = 0  # the shared blocks' capacity: the witness's signals
    domain_rows: int = 0  # and each of a, b, c's rows (the domain bounds the constraints)


class NotPrepared(Exception):
    """The synthesis process meant for a partition could not be given its circuit (the compile
    failed, the process died): the reservation is not made."""

    def __init__(self, reason: str, retryable: bool) -> None:
        super().__init__(reason)
        self.retryable = retryable


@dataclass
class Held:
    """What reserve holds for the item (engine.pipeline.reserve)."""

    key: Any
    vk: Any
    reservation: Reservation
    blocks: Blocks | None  # where its synthesis writes the assignment (engine.pipeline.handover)
    slot: int | None  # the synthesis process prepared for it (its compiled matrices held)


@dataclass(frozen=True)
class SynthOutput:
    """What synthesize made of the item (engine.pipeline.synthesize)."""

    assignment: Assignment
    publics: list[str]
    seconds: float  # in the synthesis process
    # The synthesis's recorded end: when its process was done with it (not when an engine thread
    # busy elsewhere got round to reading the answer).
    finished_at: datetime | None = None


@dataclass
class Launching:
    """What prove does with the item (engine.pipeline.prove)."""

    worker: Any  # the Worker row of the proving worker that took it
    device: str
    by: Any = None  # that worker (engine.pipeline.prove.ProvingWorker): its launch is its own
    pending: Any = None
    proof: Any = None  # the whole proof, where the launch also finished it (split proving off)
    seconds: float = 0.0  # inside the device's lock


@dataclass(frozen=True)
class Finished:
    """What finalize made of the item (engine.pipeline.finalize): what ``done`` records."""

    proof_json: Any
    publics: list[str]
    vk_digest: str
    seconds: float


@dataclass(eq=False)
class WorkItem:
    # the facts, fixed at load
    claim: Claim
    job_pk: int
    job_id: str
    kind: str
    index: int
    priority: int
    submitted_at: datetime
    circuit_id: str
    inputs: dict[str, Any]
    source: CircuitSource = CircuitSource.BUILTIN
    latest_start_at: datetime | None = None  # its deadline less its expected duration (ledger.deadlines)
    upload_dir: str = ""
    sizes: Sizes = field(default_factory=Sizes)
    # what it holds, one writer each (see the module's docstring)
    state: State = field(default_factory=State)
    held: Held | None = None
    synthesized: SynthOutput | None = None
    launch: Launching | None = None
    proof: Finished | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # around each lifecycle step

    @property
    def order(self) -> tuple[int, datetime, datetime, int, int]:
        """The claims' order: within a priority the least slack first (no deadline last), then
        the oldest job's lowest partition."""
        return (self.priority, self.latest_start_at or NO_DEADLINE, self.submitted_at, self.job_pk, self.index)

    @property
    def label(self) -> str:
        return f"P{self.index} of {self.kind} {self.job_id}"

    @property
    def zkey_path(self) -> Path:
        return Path(self.upload_dir) / ZKEY_NAME

    @property
    def key(self) -> Any:
        return self.held.key if self.held is not None else None

    @property
    def key_bytes(self) -> int:
        return self.sizes.key_bytes

    @property
    def abc_bytes(self) -> int:
        return self.sizes.abc_bytes

    @property
    def partition_bytes(self) -> int:
        return self.sizes.partition_bytes

    def abandoned(self) -> bool:
        """The prover's abort check: the records moved on (a cancel, a fence, a stop)."""
        state = self.state
        return state.cancelled or state.phase in ENDED

    def public_reason(self, text: str) -> str:
        """A failure's text as the client may read it: an upload folder (a server path that
        carries the job's internal id) never appears, only the file's own name."""
        if not self.upload_dir:
            return text
        folder = self.upload_dir.rstrip("/")
        return text.replace(folder + "/", "").replace(folder, "the upload")


def public_inputs_of(assignment_publics: Any) -> list[str]:
    """Public signals as decimal strings (snarkjs public.json's form)."""
    from engine.circuits.cs import limbs_to_ints

    return [str(v) for v in limbs_to_ints(assignment_publics)]


def load_item(claim: Claim, scale: str) -> WorkItem:
    """The claimed partition with its job's facts and the circuit's real memory needs."""
    row = Partition.objects.select_related("job").get(pk=claim.partition_id)
    job = row.job
    circuit_id = job.circuit_id or f"{job.kind}/{scale}"
    source = CircuitSource.of(job.kind, circuit_id)
    return WorkItem(claim=claim, job_pk=job.pk, job_id=job.job_id, kind=job.kind, index=row.index,
                    priority=job.priority, submitted_at=job.submitted_at, circuit_id=circuit_id, inputs=job.inputs,
                    source=source, upload_dir=job.upload_dir, latest_start_at=job.latest_start_at,
                    sizes=size_of(source, circuit_id, job.upload_dir))


def size_of(source: CircuitSource, circuit_id: str, upload_dir: str) -> Sizes:
    if source is CircuitSource.BUILTIN:
        from engine.circuits.kinds import parse_circuit_id

        shape = parse_circuit_id(circuit_id)
        needs = shape.memory
        return Sizes(key_bytes=int(needs.key_bytes + keys.table_bytes(needs)), abc_bytes=int(needs.released_bytes),
                     partition_bytes=int(needs.partition_bytes), witness_rows=int(shape.n_vars),
                     domain_rows=int(shape.domain_size))
    return _size_circom(source, upload_dir)


def _size_circom(source: CircuitSource, upload_dir: str) -> Sizes:
    """Circom circuits: the reservation follows the sizes the zkey declares (validated when it
    was uploaded or registered)."""
    from engine.circuits import job_folder
    from engine.circuits.sizing import custom_memory, generator_bytes
    from engine.prover.snarkjs import FormatError, inspect_zkey

    zkey = Path(upload_dir) / ZKEY_NAME  # a registered circuit's job folder links the circuit's zkey
    try:
        header, n_coef = inspect_zkey(zkey)
        zkey_bytes = zkey.stat().st_size
    except (OSError, FormatError):
        return Sizes()  # nothing reserved: reading the key fails the partition, not retried
    needs = custom_memory(header.n_vars, header.n_public, header.domain_size, n_coef, header.n8q, zkey_bytes)
    # from inputs, the client's witness generator runs in synthesis within this partition's reservation
    generator = generator_bytes(header.n_vars) if job_folder.from_inputs(upload_dir) else 0
    rows = {"witness_rows": int(header.n_vars), "domain_rows": int(header.domain_size)}
    if source.shares_key:  # the key cache holds a registered circuit's key once for every job
        return Sizes(key_bytes=int(needs.key_bytes + keys.table_bytes(needs)), abc_bytes=int(needs.released_bytes),
                     partition_bytes=int(needs.partition_bytes + generator), **rows)
    return Sizes(key_bytes=0, abc_bytes=int(needs.released_bytes),
                 partition_bytes=int(needs.key_bytes + needs.partition_bytes + generator), **rows)
