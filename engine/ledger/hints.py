"""Hints: "status.changed" messages on the channel layer, sent after a write commits.

They only say where to look (host, job, partition, version); the records hold the truth, so a
lost hint costs a console a refresh, never a wrong picture.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

GROUP = "provingsite.status"
log = logging.getLogger("engine.ledger")

_loop: asyncio.AbstractEventLoop | None = None


def set_event_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Embedded mode: Daphne's loop owns the in-memory layer; sends are handed to it."""
    global _loop
    _loop = loop


def _nobody_listens(layer: Any) -> bool:
    """The in-memory layer (one process) with no console in the group: a send would reach no
    one, and costs the writer an event loop's start (async_to_sync) per transition."""
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer) and not layer.groups.get(GROUP)


def publish_hint(**fields: Any) -> None:
    """Send {"type": "status.changed", host, job, partition, version} to GROUP. Never raises.

    ``logged`` (job ids) says new log lines of those jobs were recorded (engine.ledger.job_log):
    only their pages show them, so such a hint names no job of its own to re-read."""
    message = {"type": "status.changed", "host": fields.get("host"), "job": fields.get("job"),
               "partition": fields.get("partition"), "version": fields.get("version")}
    if fields.get("logged"):
        message["logged"] = list(fields["logged"])
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None or _nobody_listens(layer):
            return
        loop = _loop
        if loop is not None and loop.is_running():
            # The in-memory layer's queues belong to Daphne's loop: send from there.
            asyncio.run_coroutine_threadsafe(layer.group_send(GROUP, message), loop)
            return
        from asgiref.sync import async_to_sync

        async_to_sync(layer.group_send)(GROUP, message)
    except Exception as exc:  # hints are best effort: the records already hold the truth
        log.debug("hint not sent (%s): %s", exc, message)


