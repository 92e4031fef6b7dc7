"""Drain or resume a host from the console: /hosts/<name>/drain and /hosts/<name>/resume.

A GET shows what the action does, with a confirm button; the POST (CSRF-checked, staff or
the operator group) sets the host's ``draining`` flag through engine.actions.set_draining.
The hosts panel links here rather than embedding the form: its markup is shared by every
open console, so it cannot carry one viewer's CSRF token. The engine reads the flag at its
next heartbeat: a drained host claims nothing new and finishes what it holds.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from engine.console.auth import require_viewer
from engine.ledger.jobs import set_draining
from engine.models import EngineHost


def _act(request: HttpRequest, name: str, draining: bool) -> HttpResponse:
    require_viewer(request)
    host = get_object_or_404(EngineHost, name=name)
    if request.method == "POST":
        if set_draining(host, draining):
            said = "draining: it finishes what it holds and claims nothing new" if draining else "resumed"
        else:
            said = "already draining" if draining else "already claiming work"
        messages.info(request, f"{host.name}: {said}")
        return HttpResponseRedirect(reverse("console"))
    return render(request, "console/host_action.html", {"host": host, "draining": draining})


@login_required
@require_http_methods(["GET", "POST"])
def drain(request: HttpRequest, name: str) -> HttpResponse:
    return _act(request, name, True)


@login_required
@require_http_methods(["GET", "POST"])
def resume(request: HttpRequest, name: str) -> HttpResponse:
    return _act(request, name, False)
