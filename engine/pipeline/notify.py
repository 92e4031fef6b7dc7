"""Notify: deliver the notices owed to API clients for their ended jobs (engine.ledger.callbacks).

A thread of every engine process claims the notices due, POSTs each with its signature and a
short timeout, and records the outcome; nothing here waits on a job, and no job waits on this.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request

from engine.ledger import callbacks
from engine.models import Callback

log = logging.getLogger("engine.notify")
TIMEOUT_SECONDS = 5.0
POLL_SECONDS = 1.0


def deliver(callback: Callback) -> None:
    body = callbacks.body_of(callback)
    request = urllib.request.Request(callback.url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "provingsite-callback/1",
        callbacks.SIGNATURE_HEADER: callbacks.signature(callbacks.key_of(callback), int(time.time()), body)})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310  the client's URL
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.info("callback for %s to %s not delivered: %s", callback.job.job_id, callback.url, exc)
        callbacks.record_attempt(callback.pk, f"no answer: {exc}", delivered=False)
        return
    delivered = 200 <= status < 300
    if not delivered:
        log.info("callback for %s to %s refused: HTTP %d", callback.job.job_id, callback.url, status)
    callbacks.record_attempt(callback.pk, f"HTTP {status}", delivered=delivered)


def deliver_due(limit: int = 10) -> int:
    """Send what is due now; how many were tried."""
    due = callbacks.claim_due(limit)
    for callback in due:
        deliver(callback)
    return len(due)


def notify_forever(stopping: threading.Event) -> None:
    while not stopping.is_set():
        try:
            if deliver_due():
                continue  # more may be due at once
        except Exception:  # the database went away a moment: the notices wait in their rows
            log.exception("delivering callbacks failed")
        stopping.wait(POLL_SECONDS)
