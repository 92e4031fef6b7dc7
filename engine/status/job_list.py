"""The one job-list filter: which jobs a list shows, for the console's jobs page and the API's
``GET /jobs`` (and its cheap 304 path, engine.api.poll). Each filter means the same there: a
kind, a state, submitted at or after a moment, a client, the job id containing a text, and a
standing against its deadline; each caller checks its own input first (the API names a bad
field in a 400, the page drops it) and orders and pages as it shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Q, QuerySet

from engine.models import ApiToken, ProofJob
from engine.states import JOB_ACTIVE, PartitionState
from engine.status.records import DeadlineRow

# The deadline filter's choices: active jobs at risk or late now, finished ones that missed.
DEADLINE_FILTERS = ("at-risk", "late", "missed")


@dataclass(frozen=True)
class JobFilter:
    """Every filter a job list may apply; empty ones apply nothing."""

    owner: ApiToken | None = None  # only this client's jobs (a client token's view)
    kind: str = ""
    state: str = ""
    since: datetime | None = None  # submitted at or after
    client: str = ""  # the submitting token's name
    q: str = ""  # in the job id, any case
    deadline: str = ""  # one of DEADLINE_FILTERS


def matching(wanted: JobFilter, deadlines: Mapping[int, DeadlineRow] | None = None) -> QuerySet[ProofJob]:
    """The jobs ``wanted`` lets through, unordered. ``deadlines``: the active jobs with a
    deadline against it now (a Farm's), for the at-risk and late filters: the rule /status and
    the pipelines apply."""
    jobs = ProofJob.objects.all() if wanted.owner is None else ProofJob.objects.filter(client=wanted.owner)
    if wanted.kind:
        jobs = jobs.filter(kind=wanted.kind)
    if wanted.state:
        jobs = jobs.filter(state=wanted.state)
    if wanted.since is not None:
        jobs = jobs.filter(submitted_at__gte=wanted.since)
    if wanted.client:
        jobs = jobs.filter(client__name=wanted.client)
    if wanted.q:
        jobs = jobs.filter(job_id__icontains=wanted.q)
    if wanted.deadline == "missed":
        jobs = jobs.exclude(state__in=JOB_ACTIVE).filter(deadline__isnull=False, finished_at__gt=F("deadline"))
    elif wanted.deadline in ("at-risk", "late"):
        flag = "at_risk" if wanted.deadline == "at-risk" else "late"
        jobs = jobs.filter(pk__in=[pk for pk, row in (deadlines or {}).items() if getattr(row.standing, flag)])
    return jobs


def with_progress(jobs: QuerySet[ProofJob]) -> QuerySet[ProofJob]:
    """Each job with ``n_done``: its partitions done, as both lists show it."""
    return jobs.annotate(n_done=Count("partitions", filter=Q(partitions__state=PartitionState.DONE)))
