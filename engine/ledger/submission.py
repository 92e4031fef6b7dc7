"""The one way in: every rule a job must pass to be created or retried, whichever path asks.

The REST API (a built-in kind, a custom upload, a registered circuit from inputs or from a
.wtns), the retry endpoint, the ``submitjob`` command and the console all come through here, so
the same rules hold on each: the syntax of a job id and of a priority, a built-in kind's
inputs, the priority a token may ask for (and gets when it asks for none), its cap on queued and
running jobs, a deadline's window (engine.moments), where a callback may go
(engine.ledger.callback_targets), idempotency on the job id. Refusals are domain errors
(``SubmissionRefused`` and its kinds, ``JobConflict``); the callers only map them to an HTTP
status or a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine.circuits import kinds
from engine.ledger.callback_targets import TargetRefused, check_host, target_of
from engine.ledger.deadlines import default_deadline, latest_start
from engine.ledger.jobs import JobConflict, retry_job, submit_job
from engine.models import ApiToken, Circuit, ProofJob
from engine.moments import DEADLINE_GRACE, DEADLINE_HORIZON, window_text
from engine.states import JOB_ACTIVE, KIND_PRIORITY, Curve, Priority

__all__ = ["ActiveCapReached", "CircuitGone", "JobConflict", "JOB_ID_MAX", "JOB_ID_PATTERN", "PriorityNotAllowed",
           "Submission", "SubmissionRefused", "builtin", "callback_url_of", "check_priority", "deadline_of",
           "job_id_of", "priority_cap", "priority_of", "retry", "submit"]

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"
JOB_ID_MAX = 200
RESERVED_JOB_IDS = frozenset({"custom"})  # POST /jobs/custom is the upload, not a job


class SubmissionRefused(Exception):
    """A submission the rules refuse; ``status`` is the HTTP answer the API gives it."""

    status = 400
    code = "invalid"

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class PriorityNotAllowed(SubmissionRefused):
    status, code = 403, "forbidden"


class ActiveCapReached(SubmissionRefused):
    status, code = 429, "too_many_active_jobs"


class CircuitGone(SubmissionRefused):
    """The registered circuit was deleted while the job was being submitted."""

    status, code = 404, "not_found"


@dataclass(frozen=True)
class Submission:
    """What a job is: its inputs already validated by the path that received them."""

    kind: str
    job_id: str
    inputs: dict[str, Any]
    num_partitions: int
    circuit_id: str = ""
    scale: str = ""
    priority: int | None = None
    curve: str = Curve.BLS12_381
    deadline: datetime | None = None  # None: the kind's default offset (deadlines.default_deadline), if any
    callback_url: str = ""  # "": the token's default, if any (engine.ledger.callbacks)


def job_id_of(value: Any) -> str:
    """The job id a request names, by the syntax every path shares."""
    if not isinstance(value, str) or not value:
        raise SubmissionRefused("job_id", "is required")
    if len(value) > JOB_ID_MAX or not re.fullmatch(JOB_ID_PATTERN, value):
        raise SubmissionRefused("job_id", f"must be 1..{JOB_ID_MAX} characters of letters, digits and . _ - :, "
                                "starting alphanumeric")
    if value in RESERVED_JOB_IDS:
        raise SubmissionRefused("job_id", f"{value!r} is reserved")
    return value


def priority_of(value: Any) -> int | None:
    """A priority override: a name (critical, high, normal, low) or its number 0..3 (ASCII digits,
    as a string or an integer); None for none."""
    if value is None or value == "":
        return None
    wrong = SubmissionRefused("priority", "must be one of critical, high, normal, low, or 0..3")
    if isinstance(value, bool):
        raise wrong
    if isinstance(value, str):
        text = value.strip().lower()
        names = {label: number for number, label in Priority.choices}
        if text in names:
            return int(names[text])
        if not re.fullmatch(r"[0-3]", text):  # "²" and "٣" are digits to str.isdigit, not to int()
            raise wrong
        value = int(text)
    if isinstance(value, int) and value in Priority.values:
        return int(value)
    raise wrong


def _moment(value: Any) -> datetime:
    """An ISO 8601 date and time as a moment in UTC (UTC when it names no offset)."""
    when: datetime | None = None
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = parse_datetime(value.strip())
        except ValueError:  # the form of one, naming no such moment: month 13, an offset of 25 hours
            when = None
    if when is None:
        raise SubmissionRefused("deadline", "must be an ISO 8601 date and time, e.g. 2026-12-05T12:00:00Z")
    try:
        return (when if timezone.is_aware(when) else when.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-12:00 is in the year 10000 in UTC
        raise SubmissionRefused("deadline", "falls outside the years 1 to 9999 once in UTC") from None


def deadline_of(value: Any, now: datetime | None = None) -> datetime | None:
    """A deadline, in UTC, within the window every deadline is taken in (engine.moments: a few
    minutes in the past at most, a year ahead at most), or None for none."""
    if value is None or value == "":
        return None
    when = _moment(value)
    now = now or timezone.now()
    earliest, latest = now - DEADLINE_GRACE, now + DEADLINE_HORIZON
    if not earliest <= when <= latest:
        raise SubmissionRefused("deadline", f"must be {window_text()}: between {earliest:%Y-%m-%dT%H:%M:%SZ} "
                                            f"and {latest:%Y-%m-%dT%H:%M:%SZ} now")
    return when


def callback_url_of(value: Any) -> str:
    """A callback URL: http or https, with a host a callback may reach as written and a port in
    1..65535 (engine.ledger.callback_targets), at most 2000 characters; "" for none."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > 2000 or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in value):
        raise SubmissionRefused("callback_url", "must be an http or https URL of at most 2000 characters, "
                                                "without spaces or control characters")
    try:
        host = target_of(value).host
    except TargetRefused as exc:
        raise SubmissionRefused("callback_url", str(exc)) from None
    try:
        check_host(host)
    except TargetRefused as exc:
        raise SubmissionRefused("callback_url", f"{exc}; callbacks go to public addresses only (an operator can "
                                                "allow others: PROVINGSITE_CALLBACK_ALLOW)") from None
    return value


def builtin(kind: str, job_id: Any, inputs: Any, priority: Any, scale: str, deadline: Any = None,
            callback_url: Any = None) -> Submission:
    """A job of a built-in kind from a request's raw fields, each checked (SubmissionRefused names it)."""
    job_id = job_id_of(job_id)
    level = priority_of(priority)
    try:
        normalised, n_partitions = kinds.validate_inputs(kind, inputs)
    except kinds.InputError as exc:
        raise SubmissionRefused(exc.field if exc.field in ("kind", "inputs") else f"inputs.{exc.field}", exc.message) from None
    return Submission(kind=kind, job_id=job_id, inputs=normalised, num_partitions=n_partitions,
                      circuit_id=kinds.circuit_for(kind, scale).circuit_id, scale=scale, priority=level,
                      curve=kinds.CURVE, deadline=deadline_of(deadline), callback_url=callback_url_of(callback_url))


def check_priority(client: Any, level: int | None) -> None:
    """A token asks for at most its own maximum priority (lower numbers are higher). Cheap, so
    paths check it before reading a request's files."""
    if isinstance(client, ApiToken) and level is not None and level < client.max_priority:
        allowed = Priority(client.max_priority).label
        raise PriorityNotAllowed("priority", f"this token may ask for {allowed} priority at most; "
                                             "an operator can raise its limit")


def _check_active_cap(client: Any, job_id: str | None) -> None:
    """A token holds at most its cap of queued and running jobs; a resubmission of an existing
    job (``job_id`` names it) adds none. Inside the transaction that creates or revives the job:
    the token's row is locked first, so two requests of one token cannot both take the last place."""
    if not isinstance(client, ApiToken) or client.max_active_jobs is None:
        return
    cap = ApiToken.objects.select_for_update().filter(pk=client.pk).values_list("max_active_jobs", flat=True).first()
    if cap is None or (job_id is not None and ProofJob.objects.filter(job_id=job_id).exists()):
        return
    active = ProofJob.objects.filter(client=client, state__in=JOB_ACTIVE).count()
    if active >= cap:
        raise ActiveCapReached(None, f"this token already has {active} queued or running jobs, its cap; "
                                     "submit again once one has finished")


def _adopt(job: ProofJob, staging: Path) -> None:
    """The request's files become the job's folder, uploads/<job pk>. Inside the job's
    transaction: no engine sees the job before its files."""
    target = Path(settings.DATA_DIR) / "uploads" / str(job.pk)
    staging.rename(target)
    job.upload_dir = str(target)
    job.save(update_fields=["upload_dir"])


def priority_cap(client: Any) -> int:
    """The highest priority (the lowest number) a job of ``client`` gets, asked for or not: a
    token's own limit; none for the console and the commands."""
    return int(client.max_priority) if isinstance(client, ApiToken) else int(Priority.CRITICAL)


def submit(sub: Submission, client: Any = None, *, staged: Path | None = None,
           circuit: Circuit | None = None) -> tuple[ProofJob, bool]:
    """The job, created or (the same request again) the existing one: (job, created).

    Every value is checked here again, whichever path built ``sub``: the priority against the
    token's limit (a job sent without one gets its kind's default, lowered to the token's limit:
    a token capped at normal never gets a winning-post's critical), the deadline against its
    window, the callback URL against the callback rules.
    ``staged``: a folder of the request's files, moved into place when the job is created.
    ``circuit``: the registered circuit the job proves, its row held while the job is made so
    a deletion at the same moment cannot take it away (circuits.delete_unused locks it too).
    Raises SubmissionRefused or JobConflict."""
    check_priority(client, sub.priority)
    now = timezone.now()
    deadline = deadline_of(sub.deadline, now) or default_deadline(sub.kind, now)
    callback_url = callback_url_of(sub.callback_url)
    with transaction.atomic():
        if circuit is not None and not Circuit.objects.select_for_update().filter(pk=circuit.pk).exists():
            raise CircuitGone("circuit", f"no registered circuit with id {circuit.pk!r}")
        _check_active_cap(client, sub.job_id)
        job, created = submit_job(kind=sub.kind, job_id=sub.job_id, inputs=sub.inputs,
                                  num_partitions=sub.num_partitions, circuit_id=sub.circuit_id, scale=sub.scale,
                                  priority=sub.priority, curve=sub.curve, client=client, deadline=deadline,
                                  latest_start_at=latest_start(deadline, sub.circuit_id),
                                  callback_url=callback_url, priority_cap=priority_cap(client))
        if created and staged is not None:
            _adopt(job, staged)
    return job, created


def retry(job: ProofJob, client: Any = None) -> bool:
    """A failed or cancelled job queued again, under the same rules as a new one for the asking
    token: a priority it asked for (one other than its kind's own) within its limit, and a place
    under its cap. False when the job was neither failed nor cancelled (nothing changed)."""
    check_priority(client, None if job.priority == KIND_PRIORITY.get(job.kind) else job.priority)
    with transaction.atomic():
        _check_active_cap(client, None)
        return retry_job(job)
