"""Who may use the console: staff and members of the "operator" group (engine.api.auth.can_view).

Every console view and the console's event stream ask here, so the rule has one home."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from engine.api.auth import can_view


def may_view(user: Any) -> bool:
    """Whether ``user`` (None for an anonymous scope) may see the console."""
    return user is not None and can_view(user)


def require_viewer(request: HttpRequest) -> None:
    """Refuse (403) a logged-in user who is neither staff nor an operator."""
    if not may_view(request.user):
        raise PermissionDenied("the console is for staff and the operator group")
