"""A work item: one claimed partition on its way through this host, with everything it holds.

Where its circuit comes from decides how its key is held (``CircuitSource``): a built-in
kind's and a registered circom circuit's key are cached once per host and shared by every
job of the circuit; a client's uploaded zkey is read per job, inside the job's own memory
reservation. Its memory needs are sized from the circuit itself (the built-in kinds) or
from the sizes the zkey declares (circom circuits), before anything is reserved.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.ledger.claims import Claim
from engine.models import Partition
from engine.pipeline import keys
from engine.states import ProofKind

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


@dataclass
class WorkItem:
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
    key_bytes: int = 0
    abc_bytes: int = 0  # freed once its products are on the device: a/b/c and the H phase's working arrays
    partition_bytes: int = 0
    key: Any = None
    vk: Any = None
    reservation: Any = None
    assignment: Any = None
    pending: Any = None
    proof: Any = None
    publics: list[str] = field(default_factory=list)
    dropped: bool = False
    timings: dict[str, float] = field(default_factory=dict)

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

    def abandoned(self) -> bool:
        """The prover's abort check: the sweep marks cancelled or fenced work dropped."""
        return self.dropped

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
    item = WorkItem(claim=claim, job_pk=job.pk, job_id=job.job_id, kind=job.kind, index=row.index,
                    priority=job.priority, submitted_at=job.submitted_at, circuit_id=circuit_id,
                    inputs=job.inputs, source=CircuitSource.of(job.kind, circuit_id), upload_dir=job.upload_dir,
                    latest_start_at=job.latest_start_at)
    size_item(item)
    return item


def size_item(item: WorkItem) -> None:
    if item.source is CircuitSource.BUILTIN:
        from engine.circuits.kinds import parse_circuit_id

        needs = parse_circuit_id(item.circuit_id).memory
        item.key_bytes = int(needs.key_bytes + keys.table_bytes(needs))
        item.abc_bytes = int(needs.released_bytes)
        item.partition_bytes = int(needs.partition_bytes)
        return
    _size_circom(item)


def _size_circom(item: WorkItem) -> None:
    """Circom circuits: the reservation follows the sizes the zkey declares (validated when it
    was uploaded or registered)."""
    from engine.circuits import job_folder
    from engine.circuits.sizing import custom_memory, generator_bytes
    from engine.prover.snarkjs import FormatError, inspect_zkey

    zkey = item.zkey_path  # a registered circuit's job folder links the circuit's zkey
    try:
        header, n_coef = inspect_zkey(zkey)
        zkey_bytes = zkey.stat().st_size
    except (OSError, FormatError):
        return  # nothing reserved: reading the key fails the partition, not retried
    needs = custom_memory(header.n_vars, header.n_public, header.domain_size, n_coef, header.n8q, zkey_bytes)
    # from inputs, the client's witness generator runs in synthesis within this partition's reservation
    generator = generator_bytes(header.n_vars) if job_folder.from_inputs(item.upload_dir) else 0
    item.abc_bytes = int(needs.released_bytes)
    if item.source.shares_key:  # the key cache holds a registered circuit's key once for every job
        item.key_bytes = int(needs.key_bytes + keys.table_bytes(needs))
        item.partition_bytes = int(needs.partition_bytes + generator)
        return
    item.key_bytes = 0
    item.partition_bytes = int(needs.key_bytes + needs.partition_bytes + generator)
