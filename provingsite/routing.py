"""Channels HTTP routes: the SSE stream first, everything else to Django."""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path


def http_routes(django_app: Any) -> list[Any]:
    routes: list[Any] = []
    try:
        from engine.console.consumers import EventStreamConsumer
    except ImportError:  # the console is not installed yet
        pass
    else:
        from channels.auth import AuthMiddlewareStack

        routes.append(path("events/", AuthMiddlewareStack(EventStreamConsumer.as_asgi())))
    routes.append(re_path(r"", django_app))
    return routes
