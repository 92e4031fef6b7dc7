"""How the API writes a moment: ISO 8601 in UTC with milliseconds and a ``Z``
(``2026-12-06T22:05:13.123Z``, engine.format.iso_moment), in every body it sends, whatever
made the body (a schema, a dict of rows, a JsonResponse)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder

from engine.format import iso_moment


class MomentEncoder(NinjaJSONEncoder):
    """django-ninja's encoder, every datetime in one shape: Django's would drop the fraction of
    a moment on the second and keep it otherwise."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return iso_moment(o)
        return super().default(o)


class MomentRenderer(JSONRenderer):
    encoder_class = MomentEncoder
