"""Static files from the ASGI application, with a path outside STATIC_ROOT a plain 404."""

from __future__ import annotations

from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404


class StaticFiles(ASGIStaticFilesHandler):
    """Django's handler lets ``/static/../settings.py`` escape as a 500 with a traceback;
    that is a request for a file that is not served, so it is answered as one."""

    def serve(self, request: Any) -> Any:
        try:
            return super().serve(request)
        except SuspiciousFileOperation:
            raise Http404("no such static file") from None
