"""The API's request and response bodies (pydantic, through django-ninja).

Validation that needs the circuits (which inputs a kind takes) happens in the endpoint, via
engine.circuits.kinds, so the messages name the exact input; the schema pins what it can
(kinds, the job id's charset and length, priority names) so the OpenAPI document tells
clients and fuzzers the truth.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Discriminator, Field, StrictInt, StrictStr, Tag, model_validator
from pydantic_core import PydanticCustomError

from engine import figures
from engine.ledger.submission import JOB_ID_MAX, JOB_ID_PATTERN
from engine.moments import window_text
from engine.states import MAX_WINDOW_POST_PARTITIONS

# Letters, digits and . _ - : only: no slash, so /jobs/{job_id}/proof is never ambiguous,
# and nothing a shell or a URL would need quoted. 200 is the records' column width.

BuiltinKind = Literal["winning-post", "window-post", "porep-c2", "snap-update"]


class ErrorOut(Schema):
    error: str = Field(description="A short machine-readable code: invalid, unauthorized, not_found, conflict …")
    field: str | None = Field(None, description="The request field at fault, when one is")
    detail: str = Field(description="What is wrong, for a person")


HEX64 = r"^[0-9a-fA-F]{64}$"


class InputsIn(Schema):
    """The inputs of a built-in kind (engine.circuits.kinds says which kind takes which)."""

    model_config = ConfigDict(extra="forbid")

    sector_seed: str = Field(pattern=HEX64, description="64 hex digits: the sector's content seed")
    randomness: str = Field(pattern=HEX64, description="64 hex digits: the challenge randomness")
    data_seed: str | None = Field(None, pattern=HEX64, description="snap-update only: the new data's seed")
    partitions: StrictInt | None = Field(None, ge=1, le=MAX_WINDOW_POST_PARTITIONS,
                                         description="window-post only: how many partitions")


CALLBACK_DOC = ("Where to POST a JSON notice when the job ends (done, failed or cancelled); the token's default "
                "otherwise. http or https to a public address (an operator may allow others), port 1-65535; "
                "redirects are not followed. Signed: X-Provingsite-Signature: t=<unix>,v1=<HMAC-SHA256 hex of "
                "'<t>.<body>' keyed with the SHA-256 hex digest of your token>; retried with back-off until a 2xx")
DEADLINE_DOC = (f"When the proof is worthless (ISO 8601; UTC without an offset), {window_text()}; kept in UTC. "
                "Within a priority, claims serve the least slack first")


class BuiltinJobIn(Schema):
    """A job of a built-in kind: the kind and its inputs."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "kind": "winning-post", "job_id": "winning-post-epoch-1234",
        "inputs": {"sector_seed": "11" * 32, "randomness": "2a" * 32}}]})

    kind: BuiltinKind
    job_id: str = Field(pattern=JOB_ID_PATTERN, max_length=JOB_ID_MAX,
                        description="Your id for this request; resubmitting the same request is safe")
    # Checked by the endpoint (names and numbers both), so a bad value gets one clear message.
    priority: StrictStr | StrictInt | None = Field(
        None, description="Override the kind's default: critical, high, normal, low, or 0 (critical) .. 3 (low). "
                          "Without one, the kind's default, lowered to the token's limit")
    deadline: datetime | None = Field(None, description=(
        f"{DEADLINE_DOC}. Without one, a kind with a default offset (PROVINGSITE_DEADLINES) gets it"))
    callback_url: str | None = Field(None, max_length=2000, description=CALLBACK_DOC)
    inputs: InputsIn


class CircuitJobIn(Schema):
    """A job of a registered circom circuit (POST /circuits), proved from its input signals."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "circuit": "3f" * 32, "job_id": "multiplier-42", "inputs": {"a": "3", "b": "11"}}]})

    circuit: str = Field(pattern=HEX64, description="The registered circuit's id")
    job_id: str = Field(pattern=JOB_ID_PATTERN, max_length=JOB_ID_MAX,
                        description="Your id for this request; resubmitting the same request is safe")
    priority: StrictStr | StrictInt | None = Field(None, description="critical, high, normal, low, or 0 .. 3")
    deadline: datetime | None = Field(None, description=DEADLINE_DOC)
    callback_url: str | None = Field(None, max_length=2000, description=CALLBACK_DOC)
    inputs: dict[str, Any] = Field(description="The circuit's input signals, as snarkjs's input.json has them")

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" in data:
            raise PydanticCustomError("either_kind_or_circuit", "send either kind (a built-in kind) or circuit "
                                                                "(a registered circuit's id), not both")
        return data


def _job_shape(data: Any) -> str:
    # A body naming a circuit is a circuit job, validated on its own so a circuit's signals are
    # not checked against a built-in kind's inputs, and a built-in kind's errors stay its own.
    if isinstance(data, dict) and data.get("circuit") is not None:
        return "circuit"
    return "kind"


# The request body of POST /jobs: one of the two shapes (the OpenAPI document says oneOf).
JobIn = Annotated[Annotated[BuiltinJobIn, Tag("kind")] | Annotated[CircuitJobIn, Tag("circuit")],
                  Discriminator(_job_shape)]


def _counts(figure: figures.Figure) -> Any:
    return Field(None, description=f"{figure.name} of its current attempt: {figure.counts}")


class AttemptOut(Schema):
    """An attempt its partition kept when it ended and went back to the queue: its own figures."""

    attempt: int
    host: str | None
    worker: str | None
    ended: str | None = Field(None, description="How it ended: failed, lapsed, handed back, or the state a retry found")
    reason: str | None
    queued_at: datetime | None
    claimed_at: datetime | None
    finished_at: datetime | None
    queue_ms: int | None = None
    reserve_ms: int | None = None
    synth_ms: int | None = None
    gpu_ms: int | None = None
    finalize_ms: int | None = None
    total_ms: int | None = None


class PartitionOut(Schema):
    index: int
    state: str
    attempt: int
    host: str | None
    worker: str | None
    queue_ms: int | None = _counts(figures.QUEUE)
    reserve_ms: int | None = _counts(figures.RESERVE)
    synth_ms: int | None = _counts(figures.SYNTHESIS)
    gpu_ms: int | None = _counts(figures.GPU)
    finalize_ms: int | None = _counts(figures.FINALIZE)
    total_ms: int | None = _counts(figures.TOTAL)
    queued_at: datetime | None = Field(None, description="When its current attempt was queued")
    claimed_at: datetime | None = None
    attempts: list[AttemptOut] = Field(default_factory=list, description="The attempts it kept, oldest first")
    synth_started_at: datetime | None
    gpu_started_at: datetime | None
    finished_at: datetime | None
    error: str
    vk_digest: str | None = Field(None, description="The verifying key this partition's proof verified under")


# One curve, two names: snarkjs's identifier (``curve``, as verification_key.json and proof.json
# write it) and the curve's own name (``curve_name``); the console's pages show both (engine.format).
CURVE_DOC = "The curve as snarkjs names it (verification_key.json's `curve`): bn128 or bls12381"
CURVE_NAME_DOC = "The curve's name: BN254 (snarkjs's bn128) or BLS12-381 (bls12381)"
CIRCUIT_ID_DOC = ("What the job proves: a kind's own circuit (`<kind>/<scale>`, e.g. `snap-update/tiny`), a registered "
                  "circom circuit (`circom/<SHA-256 of its zkey>`: `circom/` and its `id` under /circuits), or a zkey "
                  "uploaded with the job itself (`custom/<the first 16 hex digits of its SHA-256>`)")


class JobSummary(Schema):
    job_id: str
    kind: str
    state: str
    priority: str
    curve: str = Field(description=CURVE_DOC)
    curve_name: str = Field(description=CURVE_NAME_DOC)
    circuit_id: str = Field(description=CIRCUIT_ID_DOC)
    num_partitions: int
    partitions_done: int
    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    verified: bool
    error: str
    vk_digest: str | None = Field(None, description=(
        "Once done: SHA-256 of the verifying key every partition's proof verified under, taken over "
        "verification_key.json's protocol, curve, nPublic, vk_alpha_1, vk_beta_2, vk_gamma_2, vk_delta_2 and IC "
        "as compact JSON with sorted keys"))
    deadline: datetime | None = Field(None, description="When the proof is worthless if not done")
    slack_secs: float | None = Field(None, description=(
        "While queued or running: the deadline less the expected finish (its start, or now, plus the p95 duration "
        "of its circuit's recorded jobs); negative when at risk"))
    at_risk: bool = Field(False, description="Expected to finish after its deadline, which has not passed yet")
    late: bool = Field(False, description="Its deadline passed before it finished; it still proves")
    missed_deadline: bool = Field(False, description="Finished after its deadline")


class CallbackOut(Schema):
    url: str
    event: str
    attempts: list[dict[str, Any]] = Field(description="Each attempt: at, and the HTTP status or why none came")
    delivered_at: datetime | None
    gave_up_at: datetime | None


class JobOut(JobSummary):
    callbacks: list[CallbackOut] = Field(default_factory=list, description="Notices of its end, and their delivery")
    queue_secs: float | None = Field(None, description=f"{figures.JOB_QUEUE.name}: {figures.JOB_QUEUE.counts}")
    total_secs: float | None = Field(None, description=f"{figures.TOTAL.name}: {figures.TOTAL.counts}")
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
    curve: str = Field(description=CURVE_DOC)
    curve_name: str = Field(description=CURVE_NAME_DOC)
    circuit_id: str = Field(description=CIRCUIT_ID_DOC)
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
    curve: str = Field(description=CURVE_DOC)
    curve_name: str = Field(description=CURVE_NAME_DOC)
    partitions: list[SnarkjsPartition]


class CalldataRow(Schema):
    index: int
    calldata: str = Field(description="verifyProof's arguments: A, B, C and the public signals, hex, as snarkjs prints them")


class SolidityCalldataOut(Schema):
    job_id: str
    partitions: list[CalldataRow]


class VerificationKeyOut(Schema):
    """snarkjs's verification_key.json: what `snarkjs groth16 verify` takes with proof.json and public.json.

    Points are decimal strings in snarkjs's projective layout: G1 [x, y, "1"], G2 [[x0, x1],
    [y0, y1], ["1", "0"]]; vk_alphabeta_12 is e(alpha, beta) in snarkjs's Fp12 tower layout."""

    protocol: Literal["groth16"]
    curve: Literal["bn128", "bls12381"]
    nPublic: int = Field(description="How many public inputs a proof has")
    vk_alpha_1: list[str]
    vk_beta_2: list[list[str]]
    vk_gamma_2: list[list[str]]
    vk_delta_2: list[list[str]]
    vk_alphabeta_12: list[list[list[str]]]
    IC: list[list[str]] = Field(description="nPublic + 1 G1 points")
