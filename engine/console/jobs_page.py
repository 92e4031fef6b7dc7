"""The console's jobs page: every job, filtered, searched and paginated, with cancel and retry
for the operator role (the same actions the admin and the API use)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, time
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, F, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from engine.console.views import _require_viewer
from engine.format import fmt_ms
from engine.ledger import submission
from engine.ledger.jobs import cancel_job
from engine.models import ApiToken, ProofJob
from engine.states import JOB_ACTIVE, JobState, PartitionState, ProofKind
from engine.status import records
from engine.status.read import one_snapshot

PAGE_SIZE = 50


# The deadline filter's choices: active jobs at risk or late now, finished ones that missed.
DEADLINE_FILTERS = ("at-risk", "late", "missed")


def _standing(job: ProofJob, active: dict[int, records.DeadlineRow]) -> str:
    """The row's deadline mark: "at-risk" or "late" for an active job now, "missed" for one that
    finished after its deadline, else none."""
    row = active.get(job.pk)
    if row is not None:
        return "late" if row.standing.late else "at-risk" if row.standing.at_risk else ""
    finished = job.finished_at if job.state not in JOB_ACTIVE else None
    return "missed" if job.deadline and finished and finished > job.deadline else ""


def _filtered(params: Any, active: dict[int, records.DeadlineRow]) -> tuple[QuerySet[ProofJob], dict[str, str]]:
    """``active``: the active jobs with a deadline against it now (records.active_deadlines)."""
    chosen = {name: str(params.get(name, "")).strip() for name in ("kind", "state", "client", "since", "q", "deadline")}
    jobs = ProofJob.objects.select_related("client", "host")
    if chosen["kind"] in ProofKind.values:
        jobs = jobs.filter(kind=chosen["kind"])
    if chosen["state"] in JobState.values:
        jobs = jobs.filter(state=chosen["state"])
    if chosen["client"]:
        jobs = jobs.filter(client__name=chosen["client"])
    since = parse_date(chosen["since"]) if chosen["since"] else None
    if since is not None:
        jobs = jobs.filter(submitted_at__gte=timezone.make_aware(datetime.combine(since, time.min)))
    if chosen["q"]:
        jobs = jobs.filter(job_id__icontains=chosen["q"])
    if chosen["deadline"] == "missed":
        jobs = jobs.exclude(state__in=JOB_ACTIVE).filter(deadline__isnull=False, finished_at__gt=F("deadline"))
    elif chosen["deadline"] in ("at-risk", "late"):
        # The same rule /status and the pipelines apply, over the (few) active jobs with one.
        flag = "at_risk" if chosen["deadline"] == "at-risk" else "late"
        jobs = jobs.filter(pk__in=[pk for pk, row in active.items() if getattr(row.standing, flag)])
    return jobs.order_by("-submitted_at", "-pk"), chosen


@login_required
def jobs_page(request: HttpRequest) -> HttpResponse:
    _require_viewer(request)
    with one_snapshot():
        active = records.active_deadlines(timezone.now())
        jobs, chosen = _filtered(request.GET, active)
        page = Paginator(jobs.annotate(n_done=Count("partitions", filter=Q(partitions__state=PartitionState.DONE))),
                         PAGE_SIZE).get_page(request.GET.get("page"))
        rows = [{"job": job, "total": fmt_ms(job.total_time.total_seconds() * 1000 if job.total_time else None),
                 "can_cancel": job.state in JOB_ACTIVE, "can_retry": job.state in (JobState.FAILED, JobState.CANCELLED),
                 "deadline": _standing(job, active)}
                for job in page.object_list]
        clients = list(ApiToken.objects.order_by("name").values_list("name", flat=True))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "console/jobs.html", {
        "rows": rows, "page": page, "chosen": chosen, "query": query.urlencode(),
        "kinds": ProofKind.values, "states": JobState.values, "clients": clients, "deadlines": DEADLINE_FILTERS,
    })


def _back(request: HttpRequest) -> HttpResponseRedirect:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("console-jobs")
    return HttpResponseRedirect(target)


def _act(request: HttpRequest, job_id: str, action: Callable[[ProofJob], None], said: str,
         allowed: Collection[str], refusal: str) -> HttpResponse:
    _require_viewer(request)
    job = get_object_or_404(ProofJob, job_id=job_id)
    if job.state not in allowed:  # the page was older than the job: say so rather than claim it happened
        messages.warning(request, f"{job.job_id} is {job.state}: {refusal}")
        return _back(request)
    action(job)
    messages.info(request, f"{job.job_id}: {said}")
    return _back(request)


@login_required
@require_POST
def cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, cancel_job, "cancelled", JOB_ACTIVE, "nothing to cancel")


@login_required
@require_POST
def retry(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, submission.retry, "queued again",  # an operator: no token limits
                (JobState.FAILED, JobState.CANCELLED), "only failed or cancelled jobs are retried")
