"""Keys with an identity: the farm proves each circuit with one verifying key, by its digest.

The first host to load a circuit's key records its digest (``setupkeys`` records the keys it
writes); a host whose key has another digest refuses the circuit, and says so on its row
(EngineHost.refused_keys, through its StatusWriter), so that the
partitions of one job never verify under two keys and the key the API serves is the one used.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from engine.models import FarmKey


class KeyMismatch(Exception):
    """This host's key for a circuit is not the one the farm proves it with."""


def adopt_key(circuit_id: str, digest: str, recorded_by: str, *, replace: bool = False) -> None:
    """The farm's key for ``circuit_id`` is ``digest``: recorded if none is yet (or ``replace``,
    an operator regenerating keys), else it must be the recorded one (KeyMismatch says both)."""
    for _ in range(2):  # a second host recording at the same moment: read what it recorded
        try:
            with transaction.atomic():
                row = FarmKey.objects.select_for_update().filter(circuit_id=circuit_id).first()
                if row is None:
                    FarmKey.objects.create(circuit_id=circuit_id, vk_digest=digest, recorded_by=recorded_by)
                    return
                if row.vk_digest == digest:
                    return
                if replace:
                    row.vk_digest, row.recorded_by = digest, recorded_by
                    row.save(update_fields=["vk_digest", "recorded_by", "recorded_at"])
                    return
                raise KeyMismatch(f"this host's key for {circuit_id} has digest {digest[:16]}…, but the farm proves it "
                                  f"with {row.vk_digest[:16]}… (recorded by {row.recorded_by}); give this host the "
                                  "farm's params directory, or run `manage.py setupkeys --force` to make new keys "
                                  "the farm's")
        except IntegrityError:
            continue
    raise KeyMismatch(f"could not record the farm's key for {circuit_id}")

