"""What a job request's fields must be, and who may see a job: shared by the jobs API, the
circuit jobs, and the command line.

Every refusal is an ApiError naming the field.
"""

from __future__ import annotations

from typing import Any

from engine.api.errors import ApiError
from engine.api.schemas import JOB_ID_MAX, JOB_ID_PATTERN
from engine.ledger.jobs import JobConflict
from engine.models import ApiToken, ProofJob
from engine.states import Priority

# POST /jobs/custom is the upload, not a job.
RESERVED_JOB_IDS = frozenset({"custom"})


def check_job_id(job_id: Any) -> str:
    import re

    if not isinstance(job_id, str) or not job_id:
        raise ApiError(400, "invalid", "job_id", "is required")
    if len(job_id) > JOB_ID_MAX or not re.fullmatch(JOB_ID_PATTERN, job_id):
        raise ApiError(400, "invalid", "job_id",
                       f"must be 1..{JOB_ID_MAX} characters of letters, digits and . _ - :, starting alphanumeric")
    if job_id in RESERVED_JOB_IDS:
        raise ApiError(400, "invalid", "job_id", f"{job_id!r} is reserved")
    return job_id


def parse_priority(value: Any) -> int | None:
    """A priority override: a name (critical, high, normal, low) or its number 0..3."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ApiError(400, "invalid", "priority", "must be a name or an integer 0..3")
    if isinstance(value, str):
        text = value.strip().lower()
        names = {label: number for number, label in Priority.choices}
        if text in names:
            return int(names[text])
        if text.lstrip("-").isdigit():
            value = int(text)
        else:
            raise ApiError(400, "invalid", "priority", "must be one of critical, high, normal, low, or 0..3")
    if isinstance(value, int) and value in Priority.values:
        return int(value)
    raise ApiError(400, "invalid", "priority", "must be one of critical, high, normal, low, or 0..3")


def _limited_to(caller: Any) -> ApiToken | None:
    """The client token whose own jobs are all the caller may see; None when it sees all."""
    return caller if isinstance(caller, ApiToken) and not caller.sees_every_job else None


def _foreign(job: ProofJob, caller: Any) -> bool:
    """The job belongs to another client than the client token asking."""
    owner = _limited_to(caller)
    return owner is not None and job.client_id != owner.pk


def _taken(job: ProofJob) -> ApiError:
    # Says nothing of the other client's job beyond the fact that the id is in use.
    return ApiError(409, "conflict", "job_id", f"job id {job.job_id!r} is already taken; choose another")


def _conflict(exc: JobConflict, client: Any = None) -> ApiError:
    if _foreign(exc.job, client):
        return _taken(exc.job)
    return ApiError(409, "conflict", "job_id",
                    f"job id {exc.job.job_id!r} is already used by a different request "
                    f"(a {exc.job.kind} job submitted at {exc.job.submitted_at.isoformat()})")


def _mine(job: ProofJob, created: bool, client: Any) -> tuple[ProofJob, bool]:
    """The same request again returns the first job, but only to the client that sent it."""
    if not created and _foreign(job, client):
        raise _taken(job)
    return job, created
