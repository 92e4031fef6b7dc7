"""Proving keys of registered circom circuits, for the engine's key cache.

A job of a registered circuit carries the circuit id ``circom/<sha256 of the zkey>``; the key
is the circuit's stored zkey, so one host loads it once and every job of the circuit reuses
it (the built-in kinds' keys are cached the same way). The engine's key loader and the
synthesis stage call it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings

from engine.prover.snarkjs import read_zkey

PREFIX = "circom/"
_ID = re.compile(r"^circom/([0-9a-f]{64})$")
ZKEY_NAME = "circuit.zkey"


def is_registered(circuit_id: str) -> bool:
    return _ID.match(circuit_id or "") is not None


def zkey_path(circuit_id: str) -> Path:
    found = _ID.match(circuit_id)
    if found is None:
        raise ValueError(f"{circuit_id!r} is not a registered circuit's id (circom/<sha256>)")
    return Path(settings.DATA_DIR) / "circuits" / found.group(1) / ZKEY_NAME


def key_bytes(circuit_id: str) -> int:
    """What the loaded key holds in memory: its point and coefficient arrays, about the zkey's size."""
    return zkey_path(circuit_id).stat().st_size


def load_key(circuit_id: str) -> Any:
    return read_zkey(zkey_path(circuit_id))


__all__ = ["PREFIX", "is_registered", "key_bytes", "load_key", "zkey_path"]
