"""The console's key chips: POST /keys/action preloads or evicts a key on one host.

The chips' buttons (hx-post with hx-confirm, the page's CSRF token in hx-headers) send the
circuit, host, action and tier; the view, for staff and the operator group only, writes the same
request as the API and ``manage.py keys`` (engine.ledger.key_requests.ask). The answer is a
short text the page shows as it is: 202 asked, 409 does not fit (naming the free bytes and the
need), 404/400 naming the field at fault. The chip changes when the engine records the new tier.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from engine.console.auth import require_viewer
from engine.ledger.key_requests import DoesNotFit, KeyRequestInvalid, ask


@login_required
@require_POST
def key_action(request: HttpRequest) -> HttpResponse:
    require_viewer(request)
    form = request.POST
    try:
        rows = ask(form.get("circuit", ""), form.get("action", ""), form.get("tier", ""), form.get("host") or None,
                   requested_by=f"console {request.user.get_username()}")
    except KeyRequestInvalid as exc:
        return HttpResponse(f"{exc.field}: {exc.detail}", status=exc.status, content_type="text/plain")
    except DoesNotFit as exc:
        return HttpResponse(f"refused: {exc}", status=409, content_type="text/plain")
    said = "; ".join(f"asked {r.host.name} to {r.action} {r.circuit_id} to {r.tier}" for r in rows)
    return HttpResponse(said, status=202, content_type="text/plain")
