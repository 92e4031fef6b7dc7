"""How the console colours and labels what it shows: gauge levels, owner hues, device slots."""

from __future__ import annotations

import zlib


def level(fraction: float) -> str:
    """Gauge colour at the seed panel's thresholds: green, amber from 60 %, red from 85 %."""
    return "red" if fraction >= 0.85 else "amber" if fraction >= 0.60 else "green"


def owner_colour(owner: str) -> str:
    """A stable hue per owner, so a pipeline keeps its colour across renders."""
    return f"hsl({zlib.crc32(owner.encode()) % 360} 55% 55%)"


def device_slot(device: str, backend: str) -> str:
    return "CPU" if device == "cpu" or backend == "cpu" else device
