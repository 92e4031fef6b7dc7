"""Notify: deliver the notices owed to API clients for their ended jobs (engine.ledger.callbacks).

A thread of every engine process claims the notices due, POSTs each with its signature and a
short timeout, and records the outcome; nothing here waits on a job, and no job waits on this.

The URL is the client's, so the POST goes only where engine.ledger.callback_targets allows: the
host is resolved once, every address checked, and the connection made to that address (the
Host header and the TLS name stay the URL's); a redirect is an answer, never followed. An
outcome says delivered, refused (an HTTP status, or the target's rule) or failed (no answer),
and never which socket error it was: a client learns nothing of the farm's network from it.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
import time

from engine.ledger import callbacks
from engine.ledger.callback_targets import TargetRefused, TargetUnresolved, pinned_address, target_of
from engine.models import Callback

log = logging.getLogger("engine.notify")
TIMEOUT_SECONDS = 5.0
POLL_SECONDS = 1.0


class _Pinned(http.client.HTTPConnection):
    """HTTP to ``address``, whatever the host name would resolve to by now."""

    def __init__(self, host: str, port: int, address: str) -> None:
        super().__init__(host, port, timeout=TIMEOUT_SECONDS)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    """HTTPS to ``address``; the certificate is checked against the URL's host name."""

    def __init__(self, host: str, port: int, address: str) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=TIMEOUT_SECONDS, context=self.tls)
        self.address = address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


def deliver(callback: Callback) -> None:
    body = callbacks.body_of(callback)
    try:
        target = target_of(callback.url)
        address = pinned_address(target.host, target.port)
    except TargetRefused as exc:  # the rule will not change by itself: no point asking again
        log.info("callback for %s to %s refused: %s", callback.job.job_id, callback.url, exc)
        callbacks.record_attempt(callback.pk, f"refused: {exc}", delivered=False, give_up=True)
        return
    except TargetUnresolved:
        callbacks.record_attempt(callback.pk, "failed: the host name did not resolve", delivered=False)
        return
    connection = (_PinnedTLS if target.https else _Pinned)(target.host, target.port, address)
    try:
        connection.request("POST", target.path, body=body, headers={
            "Content-Type": "application/json", "User-Agent": "provingsite-callback/1",
            callbacks.SIGNATURE_HEADER: callbacks.signature(callbacks.key_of(callback), int(time.time()), body)})
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        log.info("callback for %s to %s not delivered: %s", callback.job.job_id, callback.url, exc)
        callbacks.record_attempt(callback.pk, "failed: no answer", delivered=False)
        return
    finally:
        connection.close()
    if 200 <= status < 300:
        callbacks.record_attempt(callback.pk, f"delivered: HTTP {status}", delivered=True)
        return
    log.info("callback for %s to %s refused: HTTP %d", callback.job.job_id, callback.url, status)
    moved = " (redirects are not followed)" if 300 <= status < 400 else ""
    callbacks.record_attempt(callback.pk, f"refused: HTTP {status}{moved}", delivered=False)


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
