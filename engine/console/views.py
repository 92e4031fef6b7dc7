"""The console's pages: the live farm view at / and one job's record at /jobs/<job_id>.

Staff and members of the "operator" group see both, after logging in at the console's own
login page (/login/). The group is made by migration 0004; an admin adds operators to it from
the admin's user page, or `manage.py ensureoperator --operator NAME` makes one.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.contrib.auth.views import LoginView, LogoutView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from engine.api.errors import ApiError
from engine.api.job_out import snarkjs_files
from engine.api.verification_keys import job_key
from engine.console import fragments
from engine.console.auth import may_view, require_viewer
from engine.console.paths import EVENTS_PATH
from engine.console.render import clock_html
from engine.console.render import render as render_pass
from engine.console.style import legend
from engine.figures import LEGEND
from engine.format import curve_name
from engine.models import ProofJob
from engine.states import JobState
from engine.status.read import one_snapshot


class ConsoleLoginForm(AuthenticationForm):
    """The admin's login admits staff only; the console's admits whoever may view it."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "not_a_viewer": "This account may not use the console: ask an admin to add it to the operator group.",
    }

    def confirm_login_allowed(self, user: User) -> None:
        super().confirm_login_allowed(user)
        if not may_view(user):
            raise ValidationError(self.error_messages["not_a_viewer"], code="not_a_viewer")


login = LoginView.as_view(template_name="console/login.html", authentication_form=ConsoleLoginForm,
                          redirect_authenticated_user=True)
logout = LogoutView.as_view()  # POST only (Django's rule: a link someone else embeds cannot log you out)


@login_required
def console(request: HttpRequest) -> HttpResponse:
    require_viewer(request)
    rendered = render_pass()
    names = fragments.REGISTRY
    return render(request, "console/page.html", {
        "f": {name: rendered.html(name) for name in names},
        "clock": clock_html(rendered),
        "events_url": EVENTS_PATH,
        "legend": legend(), "figure_legend": LEGEND,
    })


@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    """The job's live page: its fragment as the stream sends it, then kept current over
    /events/?job=<job_id> (durations tick, the final state and proof links arrive on their own)."""
    require_viewer(request)
    job = get_object_or_404(ProofJob, job_id=job_id)
    name = fragments.detail_name(job_id)
    rendered = render_pass(fragments.Want({name}, set()))
    return render(request, "console/job.html", {
        "job": job, "fragment": rendered.html(name), "clock": clock_html(rendered),
        "events_url": f"{EVENTS_PATH}?{urlencode({'job': job_id})}",
        "admin_url": reverse("admin:engine_proofjob_change", args=[job.pk]) if request.user.is_staff else None,
        "legend": legend(), "figure_legend": LEGEND,
    })


@login_required
def job_snarkjs(request: HttpRequest, job_id: str) -> HttpResponse:
    """proof.json and public.json per partition, as snarkjs writes them, for a console login."""
    require_viewer(request)
    with one_snapshot():
        job = get_object_or_404(ProofJob, job_id=job_id, state=JobState.DONE)
        rows = []
        for part in job.partitions.order_by("index"):
            proof, public = snarkjs_files(job, part)
            rows.append({"index": part.index, "proof": proof, "public": public})
    response = JsonResponse({"job_id": job.job_id, "curve": job.curve, "curve_name": curve_name(job.curve),
                             "partitions": rows},
                            json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{json.dumps(job.job_id)[1:-1]}.snarkjs.json"'
    return response


@login_required
def job_proofs(request: HttpRequest, job_id: str) -> HttpResponse:
    """A done job's proofs as JSON: the assembled proof and each partition's. One rule with the
    API's GET /jobs/<id>/proof: a job's proofs are served once it is done, and only then; a
    cancelled or failed job's partial proofs are not (a 409 naming its state)."""
    require_viewer(request)
    with one_snapshot():
        job = get_object_or_404(ProofJob, job_id=job_id)
        if job.state != JobState.DONE:
            return JsonResponse({"error": "not_done", "field": "job_id",
                                 "detail": f"job {job.job_id!r} is {job.state}; its proof exists once done"},
                                status=409)
        body = {
            "job_id": job.job_id, "kind": job.kind, "curve": job.curve, "curve_name": curve_name(job.curve),
            "state": job.state,
            "verified": job.verified, "proof": job.proof, "public_inputs": job.public_inputs,
            "partitions": [{"index": p.index, "state": p.state, "proof": p.proof, "public_inputs": p.public_inputs}
                           for p in job.partitions.order_by("index")],
        }
    response = JsonResponse(body, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{json.dumps(job.job_id)[1:-1]}.proofs.json"'
    return response


@login_required
def job_verification_key(request: HttpRequest, job_id: str) -> HttpResponse:
    """The verification_key.json that verifies the job's proofs, for a console login: the same
    key the API serves at /api/v1/jobs/<id>/verification_key.json."""
    require_viewer(request)
    job = get_object_or_404(ProofJob, job_id=job_id)
    try:
        key = job_key(job)
    except ApiError as exc:
        return JsonResponse({"error": exc.error, "field": exc.field, "detail": exc.detail}, status=exc.status_code)
    response = JsonResponse(key, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="{json.dumps(job.job_id)[1:-1]}.verification_key.json"'
    return response
