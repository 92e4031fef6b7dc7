"""The console's jobs page: every job, filtered, searched, sorted and paginated, live, with
cancel and retry for the operator role (the same actions the admin and the API use), one job
at a time or every selected job at once.

The table is a fragment of the console's stream ("jobs:<query>", engine.console.jobs_table):
the page renders it from one pass and opens /events/?jobs=<query>, so new jobs, transitions
and progress arrive without a reload in exactly the view the page shows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from engine.console import fragments
from engine.console.auth import require_viewer
from engine.console.jobs_table import COLUMNS, DEADLINE_FILTERS, DEFAULT_SORT, JobsQuery
from engine.console.paths import EVENTS_PATH
from engine.console.render import clock_html
from engine.console.render import render as render_pass
from engine.figures import TOTAL
from engine.ledger import submission
from engine.ledger.jobs import cancel_job
from engine.models import ApiToken, ProofJob
from engine.states import JOB_ACTIVE, JobState, ProofKind
from engine.status.read import one_snapshot

# One bulk action acts on at most this many jobs (a page holds 50).
BULK_MAX = 500


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def jobs_page(request: HttpRequest) -> HttpResponse:
    """GET: the page. POST: cancel or retry the selected jobs (the collection's own URL, so no
    job id can ever be mistaken for the action)."""
    require_viewer(request)
    if request.method == "POST":
        return _bulk(request)
    query = JobsQuery.parse(request.GET)
    name = fragments.jobs_name(query)
    rendered = render_pass(fragments.Want({name}, set()))
    with one_snapshot():
        clients = list(ApiToken.objects.order_by("name").values_list("name", flat=True))
    return render(request, "console/jobs.html", {
        "table": rendered.html(name), "clock": clock_html(rendered), "query": query,
        "events_url": f"{EVENTS_PATH}?{urlencode({'jobs': query.encoded()})}",
        "kinds": ProofKind.values, "states": JobState.values, "clients": clients, "deadlines": DEADLINE_FILTERS,
        "columns": COLUMNS, "default_sort": DEFAULT_SORT, "figure_legend": (TOTAL,),
    })


def _back(request: HttpRequest) -> HttpResponseRedirect:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("console-jobs")
    return HttpResponseRedirect(target)


def _act(request: HttpRequest, job_id: str, action: Callable[[ProofJob], bool], said: str,
         allowed: Collection[str], refusal: str) -> HttpResponse:
    require_viewer(request)
    job = get_object_or_404(ProofJob, job_id=job_id)
    if job.state not in allowed:  # the page was older than the job: say so rather than claim it happened
        messages.warning(request, f"{job.job_id} is {job.state}: {refusal}")
    elif not action(job):  # it moved between the read and the write
        messages.warning(request, f"{job.job_id} changed meanwhile: {refusal}")
    else:
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


# What each bulk action does, the states it applies to, and what it says of a job it skips.
BULK: dict[str, tuple[Callable[[ProofJob], bool], Collection[str], str, str]] = {
    "cancel": (cancel_job, JOB_ACTIVE, "cancelled", "nothing to cancel"),
    "retry": (submission.retry, (JobState.FAILED, JobState.CANCELLED), "queued again",
              "only failed or cancelled jobs are retried"),
}


def _bulk(request: HttpRequest) -> HttpResponse:
    """Cancel or retry every selected job through the ledger, one by one, as the single-job
    actions do; say how many changed and which were skipped, and why."""
    action = request.POST.get("action", "")
    if action not in BULK:
        return HttpResponseBadRequest(f"action: {action!r} is not one of {', '.join(BULK)}\n",
                                      content_type="text/plain; charset=utf-8")
    selected = list(dict.fromkeys(j for j in request.POST.getlist("job") if j))
    if len(selected) > BULK_MAX:
        return HttpResponseBadRequest(f"job: at most {BULK_MAX} jobs at once, {len(selected)} selected\n",
                                      content_type="text/plain; charset=utf-8")
    if not selected:
        messages.warning(request, f"No jobs selected: nothing to {action}.")
        return _back(request)
    act, allowed, said, refusal = BULK[action]
    found = {job.job_id: job for job in ProofJob.objects.filter(job_id__in=selected)}
    changed: list[str] = []
    skipped: list[str] = []
    for job_id in selected:
        job = found.get(job_id)
        if job is None:
            skipped.append(f"{job_id}: no such job")
        elif job.state not in allowed:  # the page was older than the job
            skipped.append(f"{job_id} is {job.state}: {refusal}")
        elif act(job):
            changed.append(job_id)
        else:  # it ended (or was retried) between the read and the write
            skipped.append(f"{job_id} changed meanwhile: {refusal}")
    noun = "job" if len(changed) == 1 else "jobs"
    messages.info(request, f"{len(changed)} {noun} {said}" + (f": {', '.join(changed)}" if changed else "."),
                  extra_tags="bulk-done")
    if skipped:
        messages.warning(request, f"{len(skipped)} skipped: " + "; ".join(skipped), extra_tags="bulk-skipped")
    return _back(request)
