"""Where a job's proving key is resident: the hosts whose key list (``EngineHost.key_cache``,
written when a key loads or is evicted) holds it, and at which tier. A projection of the
page's Farm, from the same host rows every other panel reads, for the job page's key line."""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.placement import Tier, shared_key, tiers_of, uploaded
from engine.status.read_model import Farm


@dataclass(frozen=True)
class Resident:
    host: str
    tier: Tier

    @property
    def tier_name(self) -> str:
        return self.tier.name.lower()


def key_residency(farm: Farm, kind: str, circuit_id: str) -> list[Resident] | None:
    """The running hosts holding the key a job of ``kind``/``circuit_id`` needs, hot before warm;
    None for an uploaded zkey, which is its job's alone and held nowhere beforehand."""
    if uploaded(kind, circuit_id):
        return None
    key = shared_key(kind, circuit_id)
    found = [Resident(host.name, tier) for host in farm.live_hosts
             if (tier := tiers_of(host.key_cache).get(key)) is not None]
    return sorted(found, key=lambda r: (r.tier, r.host))
