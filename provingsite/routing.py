"""Channels HTTP routes: the SSE streams (the console's, an API token's jobs) first, everything else to Django."""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

from engine.console.paths import EVENTS_PATH, JOB_EVENTS_PATH


def http_routes(django_app: Any) -> list[Any]:
    from channels.auth import AuthMiddlewareStack

    from engine.api.events import JobEventsConsumer
    from engine.console.consumers import EventStreamConsumer

    return [path(EVENTS_PATH.lstrip("/"), AuthMiddlewareStack(EventStreamConsumer.as_asgi())),
            path(JOB_EVENTS_PATH.lstrip("/"), JobEventsConsumer.as_asgi()), re_path(r"", django_app)]
