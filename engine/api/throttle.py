"""Per-token request rates: a token bucket for each API token, in this process's memory.

A bucket holds up to ``burst`` requests and refills at ``rate`` per second; a request that
finds it empty is refused with the time until the next one is back, which the API sends as
``Retry-After`` with a 429. In-process on purpose: the check costs a lock and some float
arithmetic, no round trip, and a farm runs a handful of web processes, so a client's real
ceiling is at most that many times its rate, which is the point of a shedding limit (to keep
one client from starving the rest), not accounting. Buckets are keyed by the token's digest,
so there is one per live token and the table cannot grow past the token table.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings

from engine.models import ApiToken


@dataclass(frozen=True)
class Rate:
    """``per_second`` requests sustained, ``burst`` at once; a per_second of 0 is no limit."""

    per_second: float
    burst: int

    @property
    def unlimited(self) -> bool:
        return self.per_second <= 0


@dataclass
class _Bucket:
    level: float
    stamp: float


class TokenBuckets:
    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str, rate: Rate, now: float | None = None) -> float:
        """Spend one request from ``key``'s bucket: 0.0 when allowed, else the seconds to wait."""
        if rate.unlimited:
            return 0.0
        now = time.monotonic() if now is None else now
        capacity = float(max(rate.burst, 1))
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(level=capacity, stamp=now)
            bucket.level = min(capacity, bucket.level + (now - bucket.stamp) * rate.per_second)
            bucket.stamp = now
            if bucket.level >= 1.0:
                bucket.level -= 1.0
                return 0.0
            return (1.0 - bucket.level) / rate.per_second

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()


BUCKETS = TokenBuckets()


def rate_for(token: ApiToken) -> Rate:
    """The rate a token gets: client and operator tokens each have their own setting."""
    knobs = settings.PROVINGSITE
    if not knobs["LOAD_SHEDDING"]:
        return Rate(0.0, 0)
    if token.sees_every_job:
        return Rate(float(knobs["API_OPERATOR_RATE"]), int(knobs["API_OPERATOR_BURST"]))
    return Rate(float(knobs["API_RATE"]), int(knobs["API_BURST"]))


def wait_for(token: ApiToken) -> float:
    """Spend one request of ``token``'s rate: 0.0 to go ahead, else seconds until allowed."""
    return BUCKETS.take(token.token_hash, rate_for(token))
