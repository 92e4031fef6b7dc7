"""The engine's side of operators' key control: carry out this host's pending KeyRequests.

Run by the engine's key-control thread as soon as a request for its host commits (the ledger
wakes it: engine.ledger.new_work), and at every heartbeat should that wake be lost, so a
request waits a beat at most. The engine re-checks a preload against its own memory manager
(KeyCache.preload refuses one that does not fit its free budget) and records every outcome on
the request's row: done, refused (does not fit, in use) or failed.
"""

from __future__ import annotations

import logging

from engine.ledger.key_requests import finish, pending_for
from engine.models import KeyRequest
from engine.pipeline.keycache import KeyCache, KeyControlRefused, KeyTier

log = logging.getLogger("engine")


def carry_out(host_id: int, keycache: KeyCache) -> int:
    """This host's pending requests, oldest first; returns how many were finished."""
    requests = pending_for(host_id)
    for request in requests:
        tier = KeyTier(request.tier)
        try:
            if request.action == KeyRequest.Action.PRELOAD:
                keycache.preload(request.circuit_id, tier, request.needed_bytes)
            else:
                keycache.demote(request.circuit_id, tier)
        except KeyControlRefused as exc:
            log.warning("refused the operator's %s of %s to %s: %s", request.action, request.circuit_id, tier, exc)
            finish(request, KeyRequest.State.REFUSED, str(exc))
        except Exception as exc:  # no key for the circuit, not the farm's, …: recorded, never fatal
            log.warning("could not %s %s to %s: %s", request.action, request.circuit_id, tier, exc)
            finish(request, KeyRequest.State.FAILED, f"{type(exc).__name__}: {exc}")
        else:
            now = keycache.tier(request.circuit_id)
            if request.action == KeyRequest.Action.PRELOAD and now is not tier and now is not KeyTier.HOT:
                finish(request, KeyRequest.State.FAILED, f"now {now}: see the engine's log")  # its image failed
                continue
            log.info("operator's %s of %s: now %s", request.action, request.circuit_id, now)
            finish(request, KeyRequest.State.DONE, f"now {now}")
    return len(requests)
