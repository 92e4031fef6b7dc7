"""Who may see a job, and how a conflict is told to the one asking: shared by the jobs API and
the circuit jobs. What a request's fields must be is the submission service's
(engine.ledger.submission: job_id_of, priority_of)."""

from __future__ import annotations

from typing import Any

from engine.api.errors import ApiError
from engine.format import iso_moment
from engine.ledger.jobs import JobConflict
from engine.models import ApiToken, ProofJob


def limited_to(caller: Any) -> ApiToken | None:
    """The client token whose own jobs are all the caller may see; None when it sees all."""
    return caller if isinstance(caller, ApiToken) and not caller.sees_every_job else None


def _foreign(job: ProofJob, caller: Any) -> bool:
    """The job belongs to another client than the client token asking."""
    owner = limited_to(caller)
    return owner is not None and job.client_id != owner.pk


def _taken(job: ProofJob) -> ApiError:
    # Says nothing of the other client's job beyond the fact that the id is in use.
    return ApiError(409, "conflict", "job_id", f"job id {job.job_id!r} is already taken; choose another")


def conflict_error(exc: JobConflict, client: Any = None) -> ApiError:
    if _foreign(exc.job, client):
        return _taken(exc.job)
    return ApiError(409, "conflict", "job_id",
                    f"job id {exc.job.job_id!r} is already used by a different request "
                    f"(a {exc.job.kind} job submitted at {iso_moment(exc.job.submitted_at)})")


def own_job(job: ProofJob, created: bool, client: Any) -> tuple[ProofJob, bool]:
    """The same request again returns the first job, but only to the client that sent it."""
    if not created and _foreign(job, client):
        raise _taken(job)
    return job, created
