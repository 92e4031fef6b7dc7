"""The API's request and response bodies (pydantic, through django-ninja).

Validation that needs the circuits (which inputs a kind takes) happens in the endpoint, via
engine.circuits.kinds, so the messages name the exact input; the schema pins what it can
(kinds, the job id's charset and length, priority names) so the OpenAPI document tells
clients and fuzzers the truth.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Schema
from pydantic import Field, StrictInt, StrictStr

# Letters, digits and . _ - : only: no slash, so /jobs/{job_id}/proof is never ambiguous,
# and nothing a shell or a URL would need quoted. 200 is the records' column width.
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"
JOB_ID_MAX = 200

BuiltinKind = Literal["winning-post", "window-post", "porep-c2", "snap-update"]


class ErrorOut(Schema):
    error: str = Field(description="A short machine-readable code: invalid, unauthorized, not_found, conflict …")
    field: str | None = Field(None, description="The request field at fault, when one is")
    detail: str = Field(description="What is wrong, for a person")


class JobIn(Schema):
    kind: BuiltinKind
    job_id: str = Field(pattern=JOB_ID_PATTERN, max_length=JOB_ID_MAX,
                        description="Your id for this request; resubmitting the same request is safe")
    # Checked by the endpoint (names and numbers both), so a bad value gets one clear message.
    priority: StrictStr | StrictInt | None = Field(
        None, description="Override the kind's default: critical, high, normal, low, or 0 (critical) .. 3 (low)")
    inputs: dict[str, Any] = Field(default_factory=dict,
                                   description="sector_seed, randomness (64 hex digits); data_seed for "
                                               "snap-update; partitions for window-post")


class PartitionOut(Schema):
    index: int
    state: str
    attempt: int
    host: str | None
    worker: str | None
    queue_ms: int | None
    synth_ms: int | None
    gpu_ms: int | None
    finalize_ms: int | None
    synth_started_at: datetime | None
    gpu_started_at: datetime | None
    finished_at: datetime | None
    error: str


class JobSummary(Schema):
    job_id: str
    kind: str
    state: str
    priority: str
    curve: str
    circuit_id: str
    num_partitions: int
    partitions_done: int
    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    verified: bool
    error: str


class JobOut(JobSummary):
    queue_secs: float | None
    total_secs: float | None
    partitions: list[PartitionOut]
    proof: Any = Field(None, description="The partition proofs in order, once the job is done")
    public_inputs: Any = Field(None, description="The public inputs per partition, once done")
    links: dict[str, str]


class JobPage(Schema):
    count: int
    limit: int
    offset: int
    items: list[JobSummary]


class ProofOut(Schema):
    job_id: str
    kind: str
    curve: str
    circuit_id: str
    verified: bool
    proof: Any
    public_inputs: Any
    partitions: list[dict[str, Any]]


class SnarkjsPartition(Schema):
    index: int
    proof: dict[str, Any] = Field(description="proof.json as snarkjs writes it")
    public: list[str] = Field(description="public.json as snarkjs writes it")


class SnarkjsOut(Schema):
    job_id: str
    curve: str
    partitions: list[SnarkjsPartition]
