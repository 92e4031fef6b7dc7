"""Notifications for API clients: when a job ends, its client is told at its callback URL.

The notification is a row (Callback) written in the very transaction that ends the job, so a
job is never ended without being owed its notice; delivery is apart, by whichever engine
process is free (``claim_due``: SKIP LOCKED, with a lease in ``next_at``), and never holds the
job back: its state is final before any POST. A failed delivery is tried again with back-off
(2 s, 4 s … at most an hour apart), MAX_ATTEMPTS times in all, every attempt recorded; one the
callback rules refuse (engine.ledger.callback_targets: a target that is not public) is not.

The POST carries ``X-Provingsite-Signature: t=<unix seconds>,v1=<hex>``: HMAC-SHA256 over
``<t>.<body>`` keyed with the SHA-256 hex digest of the client's token, which the service
stores and the client can compute, so no second secret has to be handed out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from engine.format import iso_moment
from engine.models import Callback, ProofJob

MAX_ATTEMPTS = 8
LEASE = timedelta(seconds=30)  # an attempt in flight; a process that dies mid-POST frees it after this
SIGNATURE_HEADER = "X-Provingsite-Signature"


def owe(job: ProofJob) -> None:
    """Inside the transaction that ends ``job``: its client's notice, if it asked for one."""
    if job.client is None:
        return
    url = job.callback_url or job.client.callback_url
    if url:
        Callback.objects.create(job=job, url=url, event=job.state, next_at=timezone.now())


def claim_due(limit: int = 10) -> list[Callback]:
    """Notices due now, leased to the caller for LEASE (no other process sends them meanwhile)."""
    now = timezone.now()
    with transaction.atomic():
        due = list(Callback.objects.select_for_update(skip_locked=True, of=("self",))
                   .filter(delivered_at__isnull=True, gave_up_at__isnull=True, next_at__lte=now)
                   .select_related("job", "job__client").order_by("next_at")[:limit])
        Callback.objects.filter(pk__in=[c.pk for c in due]).update(next_at=now + LEASE)
    return due


def body_of(callback: Callback) -> bytes:
    job = callback.job
    return json.dumps({
        "job_id": job.job_id, "state": callback.event, "kind": job.kind,
        "finished_at": iso_moment(job.finished_at),
        "error": job.error, "vk_digest": job.vk_digest or None,
        "links": {"self": f"/api/v1/jobs/{job.job_id}", "proof": f"/api/v1/jobs/{job.job_id}/proof"},
    }, separators=(",", ":")).encode()


def signature(key: str, timestamp: int, body: bytes) -> str:
    """The header value: the client checks it with the SHA-256 hex digest of its own token."""
    mac = hmac.new(key.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def key_of(callback: Callback) -> str:
    client = callback.job.client
    return client.token_hash if client is not None else ""


def record_attempt(callback_id: int, outcome: str, delivered: bool, at: datetime | None = None,
                   give_up: bool = False) -> None:
    """One attempt's outcome (delivered, refused or failed, and why): delivered, or due again
    after its back-off, or given up after MAX_ATTEMPTS (at once with ``give_up``: a target the
    callback rules refuse)."""
    at = at or timezone.now()
    with transaction.atomic():
        row = Callback.objects.select_for_update().get(pk=callback_id)
        row.attempts = [*row.attempts, {"at": at.isoformat(), "outcome": outcome}]
        if delivered:
            row.delivered_at = at
        elif give_up or len(row.attempts) >= MAX_ATTEMPTS:
            row.gave_up_at = at
        else:
            row.next_at = at + timedelta(seconds=min(2 ** len(row.attempts), 3600))
        row.save(update_fields=["attempts", "delivered_at", "gave_up_at", "next_at"])
