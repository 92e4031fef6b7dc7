"""The jobs endpoints: submit, upload a custom circuit, read, list, cancel, retry, download.

Every refusal is an ApiError, which the API turns into ``{"error", "field", "detail"}`` with
a 4xx status; engine.api.errors has the handlers.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from django.conf import settings
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone
from ninja import Body, Query, Router, Schema, Status
from ninja import Path as PathParam
from pydantic import Field, field_validator

from engine.api.auth import client_of
from engine.api.errors import ApiError
from engine.api.etags import entity_tag, etag_matches, not_modified
from engine.api.job_fields import conflict_error, limited_to, own_job
from engine.api.job_out import job_detail, job_summary, proof_document, snarkjs_files
from engine.api.proof_bytes import BYTES_RESPONSE, job_proof_bytes
from engine.api.schemas import (
    CALLBACK_DOC,
    DEADLINE_DOC,
    JOB_ID_MAX,
    JOB_ID_PATTERN,
    CircuitJobIn,
    ErrorOut,
    JobIn,
    JobOut,
    JobPage,
    JobSummary,
    ProofOut,
    SnarkjsOut,
    SolidityCalldataOut,
)
from engine.api.uploads import (
    CUSTOM_NAMES,
    UPLOAD_FIELDS,
    StagedFile,
    StreamingLimitHandler,
    UploadTooLarge,
    checked_upload,
    discard,
)
from engine.format import curve_name
from engine.ledger import submission
from engine.ledger.deadlines import expected_seconds
from engine.ledger.submission import JobConflict, Submission
from engine.models import ApiToken, ProofJob
from engine.prover.custom import validate_custom
from engine.prover.formats.errors import FormatError
from engine.states import JOB_TERMINAL, Curve, JobState, ProofKind
from engine.status.job_list import JobFilter, matching, with_progress
from engine.status.read import one_snapshot

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations  # django-stubs' type of an annotated row

router = Router(tags=["jobs"])

ERRORS: dict[int | tuple[int, ...], Any] = {(400, 401, 403, 404, 409, 413, 429): ErrorOut}
MAX_PAGE = 500
# Far past any real history, and small enough that offset + limit fits every database's
# 64-bit LIMIT/OFFSET (a larger one was a 500).
MAX_OFFSET = 10**9
# The example is the id of JobIn's example, so a fuzzer that submits the example first then
# reads, cancels and retries a job that exists, not only ids that 404.
JobIdPath = Annotated[str, PathParam(..., example="winning-post-epoch-1234")]  # POST /jobs/custom is the upload, not a job


def submit_builtin(kind: str, job_id: str, inputs: Any, priority: Any, client: Any = None,
                   deadline: Any = None, callback_url: Any = None) -> tuple[ProofJob, bool]:
    """A job of a built-in kind through the submission rules (their SubmissionRefused is the caller's 4xx)."""
    sub = submission.builtin(kind, job_id, inputs, priority, settings.PROVINGSITE["SCALE"], deadline, callback_url)
    try:
        job, created = submission.submit(sub, client)
    except JobConflict as exc:
        raise conflict_error(exc, client) from None
    return own_job(job, created, client)


def visible_jobs_for(client: ApiToken) -> QuerySet[ProofJob]:
    """The jobs ``client`` may see: a client token its own, an operator token all."""
    owner = limited_to(client)
    return ProofJob.objects.all() if owner is None else ProofJob.objects.filter(client=owner)


def visible_jobs(request: HttpRequest) -> QuerySet[ProofJob]:
    """The jobs the caller of an API view may see."""
    return visible_jobs_for(client_of(request))


class _PartsRevision(TypedDict):
    parts_revision: int | None  # the sum of the job's partitions' revisions (None: none)


def visible_job(request: HttpRequest, job_id: str) -> ProofJob:
    return _one(visible_jobs(request).filter(job_id=job_id), job_id)


def _job_with_parts_revision(request: HttpRequest, job_id: str) -> WithAnnotations[ProofJob, _PartsRevision]:
    """The job with the sum of its partitions' revisions, in the same query."""
    return _one(visible_jobs(request).filter(job_id=job_id).annotate(parts_revision=Sum("partitions__revision")),
                job_id)


def _one[Job: ProofJob](jobs: QuerySet[Job], job_id: str) -> Job:
    # PostgreSQL refuses a NUL in a query string with an error; no job id can hold one.
    # Another client's job is "not found", the same answer as a job that does not exist.
    job = None if "\x00" in job_id else jobs.first()
    if job is None:
        raise ApiError(404, "not_found", "job_id", f"no job with id {job_id!r}")
    return job


def _done(job: ProofJob) -> None:
    if job.state != JobState.DONE:
        raise ApiError(409, "not_done", "job_id", f"job {job.job_id!r} is {job.state}; its proof exists once done")


# ---- endpoints ---------------------------------------------------------------------------


@router.post("/jobs", response={200: JobOut, 201: JobOut, **ERRORS, 507: ErrorOut}, summary="Submit a proof request")
def create_job(request: HttpRequest, payload: Body[JobIn]) -> Status:
    """201 with the new job; 200 with the existing job when the same request is sent again;
    409 when the job id is already used by a different request."""
    if isinstance(payload, CircuitJobIn):  # {"circuit": id, "inputs": signals}: engine.api.submit_circuit
        from engine.api.submit_circuit import submit_circuit_job

        job, created = own_job(*submit_circuit_job(payload, client=client_of(request)),
                             client_of(request))
        return Status(201 if created else 200, job_detail(job))
    inputs = payload.inputs.model_dump(exclude_none=True)
    job, created = submit_builtin(payload.kind, payload.job_id, inputs, payload.priority,
                                  client=client_of(request), deadline=payload.deadline,
                                  callback_url=payload.callback_url)
    return Status(201 if created else 200, job_detail(job))


_CUSTOM_BODY = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["job_id", "zkey", "wtns"],
            "properties": {
                "job_id": {"type": "string", "pattern": JOB_ID_PATTERN, "maxLength": JOB_ID_MAX},
                "priority": {"type": "string", "description": "critical, high, normal, low or 0..3"},
                "deadline": {"type": "string", "format": "date-time", "description": DEADLINE_DOC},
                "callback_url": {"type": "string", "maxLength": 2000, "description": CALLBACK_DOC},
                "zkey": {"type": "string", "format": "binary", "description": "snarkjs Groth16 .zkey"},
                "wtns": {"type": "string", "format": "binary", "description": "snarkjs .wtns witness"},
                "r1cs": {"type": "string", "format": "binary",
                         "description": "optional: circom's .r1cs; the witness is then checked against every "
                                        "constraint at upload"},
            },
        }}},
    }
}


@router.post("/jobs/custom", response={200: JobOut, 201: JobOut, **ERRORS, 507: ErrorOut}, openapi_extra=_CUSTOM_BODY,
             summary="Submit your own circuit (snarkjs zkey + wtns)")
def create_custom_job(request: HttpRequest) -> Status:
    """The files are streamed to disk with a running count; an upload over the limit gets a
    413 before it is read whole. Both files are then validated in full (400 naming the file
    and the reason); the curve (BN254 or BLS12-381) is read from the zkey. With the optional
    ``r1cs``, a witness that does not satisfy the circuit is a 400 naming ``wtns``."""
    limit = checked_upload(request, "job_id, zkey and wtns")
    uploads = Path(settings.DATA_DIR) / "uploads"
    staging = uploads / f".incoming-{secrets.token_hex(8)}"
    request.upload_handlers = [StreamingLimitHandler(staging, limit, request, names=CUSTOM_NAMES)]
    try:
        return _accept_custom(request, uploads, staging)
    except UploadTooLarge as exc:
        raise ApiError(413, "too_large", "body", str(exc)) from None
    except MultiPartParserError as exc:
        raise ApiError(400, "invalid", "body", f"not a readable multipart body ({exc})") from None
    finally:
        discard(staging)  # moved into place when accepted; anything left is not wanted


def _accept_custom(request: HttpRequest, uploads: Path, staging: Path) -> Status:
    files = request.FILES  # reads the body through StreamingLimitHandler
    job_id = submission.job_id_of(request.POST.get("job_id"))
    level = submission.priority_of(request.POST.get("priority"))
    submission.check_priority(client_of(request), level)  # before the files are read
    deadline = submission.deadline_of(request.POST.get("deadline"))
    callback_url = submission.callback_url_of(request.POST.get("callback_url"))
    staged: dict[str, StagedFile] = {}
    for name in UPLOAD_FIELDS:
        item = files.get(name)
        if not isinstance(item, StagedFile) or item.size == 0:
            raise ApiError(400, "invalid", name, f"a non-empty .{name} file is required")
        staged[name] = item
    r1cs = files.get("r1cs")
    if r1cs is not None and (not isinstance(r1cs, StagedFile) or r1cs.size == 0):
        raise ApiError(400, "invalid", "r1cs", "when sent, must be a non-empty .r1cs file")
    try:
        curve = validate_custom(staged["zkey"].path, staged["wtns"].path,
                                r1cs.path if isinstance(r1cs, StagedFile) else None).curve
    except FormatError as exc:
        raise ApiError(400, "invalid", exc.field, exc.message) from None
    inputs = {f"{n}_{attr}": getattr(staged[n], attr) for n in UPLOAD_FIELDS for attr in ("sha256", "size")}
    sub = Submission(kind=ProofKind.CUSTOM, job_id=job_id, inputs=inputs, num_partitions=1,
                     circuit_id=f"custom/{staged['zkey'].sha256[:16]}", priority=level, curve=curve,
                     deadline=deadline, callback_url=callback_url)
    try:
        job, created = submission.submit(sub, client_of(request), staged=staging)
    except JobConflict as exc:
        raise conflict_error(exc, client_of(request)) from None
    job, created = own_job(job, created, client_of(request))
    return Status(201 if created else 200, job_detail(job))


class JobFilters(Schema):
    kind: str | None = Field(None, description="Only this kind")
    state: str | None = Field(None, description="Only this state: queued, running, done, failed, cancelled")
    since: datetime | None = Field(None, description="Only jobs submitted at or after this time (ISO 8601)")
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)

    @field_validator("since")
    @classmethod
    def since_in_utc(cls, value: datetime | None) -> datetime | None:
        """In UTC, so no database sees an offset it refuses (PostgreSQL takes ±15:59 at most)
        and a time whose UTC falls outside years 1..9999 is the client's error, not a 500."""
        if value is None:
            return None
        try:
            aware = value if timezone.is_aware(value) else timezone.make_aware(value)
            return aware.astimezone(UTC)
        except OverflowError:
            raise ValueError("is outside the years 1 to 9999 once converted to UTC") from None


# ---- conditional reads -------------------------------------------------------------------
# A poller sends back the ETag it got; while nothing it would see has changed, the answer is
# a 304 built from one aggregate query instead of the page. Every write to a job or
# partition counts up the row's revision, so a sum of revisions grows with every change.


def page_etag(jobs: QuerySet[ProofJob], filters: JobFilters) -> str:
    # A change to a job or a partition in the set grows a sum of revisions; a job entering
    # or leaving it changes the count or the sum of ids as well.
    agg = jobs.aggregate(n=Count("pk", distinct=True), ids=Sum("pk", distinct=True), v=Sum("revision"),
                         pv=Sum("partitions__revision"))
    return entity_tag("p", agg["n"], agg["ids"] or 0, agg["v"] or 0, agg["pv"] or 0, filters.offset, filters.limit)


def filtered_for(client: ApiToken, filters: JobFilters) -> QuerySet[ProofJob]:
    """The jobs ``client`` may see that pass ``filters`` (the list view's and poll.py's query):
    the console's jobs page filters with the same rule (engine.status.job_list)."""
    if filters.kind is not None and filters.kind not in ProofKind.values:
        raise ApiError(400, "invalid", "kind", f"unknown kind; expected one of {', '.join(ProofKind.values)}")
    if filters.state is not None and filters.state not in JobState.values:
        raise ApiError(400, "invalid", "state", f"unknown state; expected one of {', '.join(JobState.values)}")
    return matching(JobFilter(owner=limited_to(client), kind=filters.kind or "", state=filters.state or "",
                              since=filters.since))


@router.get("/jobs", response={200: JobPage, 304: None, **ERRORS}, summary="List jobs, newest first")
def list_jobs(request: HttpRequest, filters: Query[JobFilters], response: HttpResponse) -> Any:
    """Sends an ETag; with ``If-None-Match`` naming it, a 304 while the page is unchanged."""
    jobs = filtered_for(client_of(request), filters)
    with one_snapshot():
        etag = page_etag(jobs, filters)
        if etag_matches(request, etag):
            return not_modified(etag)
        count = jobs.count()
        page = list(with_progress(jobs.order_by("-submitted_at", "-pk"))[filters.offset:filters.offset + filters.limit])
        expected = expected_seconds({job.circuit_id for job in page if job.deadline is not None})
        items = [job_summary(job, expected=expected) for job in page]
    response["ETag"] = etag
    return {"count": count, "limit": filters.limit, "offset": filters.offset, "items": items}


@router.get("/jobs/{job_id}", response={200: JobOut, 304: None, **ERRORS},
            summary="One job: state, partitions, timings")
def get_job(request: HttpRequest, job_id: JobIdPath, response: HttpResponse) -> Any:
    """Sends an ETag; with ``If-None-Match`` naming it, a 304 while the job is unchanged."""
    with one_snapshot():
        job = _job_with_parts_revision(request, job_id)
        etag = entity_tag("j", job.pk, job.revision, job.parts_revision or 0)
        if etag_matches(request, etag):
            return not_modified(etag)
        body = job_detail(job)
    response["ETag"] = etag
    return body


@router.get("/jobs/{job_id}/proof", response={200: ProofOut, **ERRORS}, openapi_extra=BYTES_RESPONSE,
            summary="The proof, in our format (JSON) or as compressed bytes (format=bytes)")
def get_proof(request: HttpRequest, job_id: JobIdPath,
              format: Literal["json", "bytes"] = Query("json", description=(
                  "json: our document; bytes: the compressed Groth16 encoding, application/octet-stream"))) -> Any:
    job = visible_job(request, job_id)
    _done(job)
    if format == "bytes":
        body = job_proof_bytes([p.proof for p in job.partitions.order_by("index")])
        response = HttpResponse(body, content_type="application/octet-stream")
        response["Content-Disposition"] = f'attachment; filename="{job.job_id}.proof"'
        return response
    return proof_document(job)


@router.get("/jobs/{job_id}/proof/snarkjs", response={200: SnarkjsOut, **ERRORS},
            summary="proof.json and public.json per partition, as snarkjs writes them")
def get_snarkjs_proof(request: HttpRequest, job_id: JobIdPath) -> dict[str, Any]:
    job = visible_job(request, job_id)
    _done(job)
    rows = []
    for part in job.partitions.order_by("index"):
        proof, public = snarkjs_files(job, part)
        rows.append({"index": part.index, "proof": proof, "public": public})
    return {"job_id": job.job_id, "curve": job.curve, "curve_name": curve_name(job.curve), "partitions": rows}


@router.get("/jobs/{job_id}/proof/snarkjs/{index}/{name}", response={200: Any, **ERRORS},
            summary="One partition's proof.json or public.json, as a file snarkjs reads")
def get_snarkjs_file(request: HttpRequest, job_id: JobIdPath, index: int,
                     name: Literal["proof.json", "public.json"]) -> HttpResponse:
    """The file itself, ready for ``snarkjs groth16 verify verification_key.json public.json
    proof.json`` (with the job's ``verification_key.json``)."""
    job = visible_job(request, job_id)
    _done(job)
    part = job.partitions.filter(index=index).first()
    if part is None:
        raise ApiError(404, "not_found", "index", f"job {job_id!r} has partitions 0..{job.num_partitions - 1}")
    proof, public = snarkjs_files(job, part)
    response = HttpResponse(json.dumps(proof if name == "proof.json" else public, indent=1),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@router.get("/jobs/{job_id}/proof/soliditycalldata", response={200: SolidityCalldataOut, **ERRORS},
            summary="Each partition's proof as the arguments of the Solidity verifier (BN254)")
def get_solidity_calldata(request: HttpRequest, job_id: JobIdPath) -> dict[str, Any]:
    """What ``snarkjs zkey export soliditycalldata public.json proof.json`` prints, per partition:
    the arguments of ``verifyProof`` of the circuit's verifier.sol."""
    from engine.solidity_verifier import solidity_calldata

    job = visible_job(request, job_id)
    _done(job)
    if job.curve != Curve.BN254:
        raise ApiError(409, "no_verifier", "job_id", f"job {job_id!r} is over {job.curve}: Solidity verifiers "
                                                     "(the EVM's pairing precompile) are BN254's only")
    rows = [{"index": part.index, "calldata": solidity_calldata(*snarkjs_files(job, part))}
            for part in job.partitions.order_by("index")]
    return {"job_id": job.job_id, "partitions": rows}


@router.post("/jobs/{job_id}/cancel", response={200: JobOut, **ERRORS}, summary="Cancel a queued or running job")
def cancel(request: HttpRequest, job_id: JobIdPath) -> dict[str, Any]:
    from engine.ledger import jobs as ledger_jobs

    job = visible_job(request, job_id)
    if job.state in JOB_TERMINAL:
        raise ApiError(409, "invalid_state", "job_id", f"job {job_id!r} is already {job.state}")
    ledger_jobs.cancel_job(job)
    return job_detail(visible_job(request, job_id))


@router.post("/jobs/{job_id}/retry", response={200: JobOut, **ERRORS}, summary="Retry a failed or cancelled job")
def retry(request: HttpRequest, job_id: JobIdPath) -> dict[str, Any]:
    """Under the submission rules: a 403 for a priority above the token's, a 429 at its cap."""
    job = visible_job(request, job_id)
    if job.state not in (JobState.FAILED, JobState.CANCELLED):
        raise ApiError(409, "invalid_state", "job_id", f"job {job_id!r} is {job.state}; only failed or cancelled "
                                                       "jobs can be retried")
    submission.retry(job, client_of(request))
    return job_detail(visible_job(request, job_id))


__all__ = ["router", "submit_builtin", "JobSummary"]
