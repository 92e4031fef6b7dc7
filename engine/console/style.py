"""How the console colours and labels what it shows: gauge levels, owner hues, device slots."""

from __future__ import annotations

import zlib


def level(fraction: float) -> str:
    """Gauge colour at the seed panel's thresholds: green, amber from 60 %, red from 85 %."""
    return "red" if fraction >= 0.85 else "amber" if fraction >= 0.60 else "green"


def owner_colour(owner: str) -> str:
    """A stable hue per owner, so a pipeline keeps its colour across renders."""
    return f"hsl({zlib.crc32(owner.encode()) % 360} 55% 55%)"


# Each proof kind's bar colour, chosen rather than hashed: hashed hues put winning-post beside
# snap-update and porep-c2 beside custom, and some near `done`'s green (hue 120). These are
# at least 45 degrees from each other and from green.
KIND_HUES = {"winning-post": 285, "window-post": 30, "porep-c2": 195, "snap-update": 335, "custom": 75}


def kind_colour(kind: str) -> str:
    hue = KIND_HUES.get(kind)
    return owner_colour(kind) if hue is None else f"hsl({hue} 60% 58%)"


def device_slot(device: str, backend: str) -> str:
    return "CPU" if device == "cpu" or backend == "cpu" else device


# What each partition state's colour means, in the legend under the cells.
STATE_MEANING = {
    "pending": "waiting to be claimed",
    "reserving": "claimed by a host, waiting for its proving key and memory",
    "synthesizing": "witness synthesis on the CPU",
    "synth_done": "synthesized, waiting for a GPU worker",
    "gpu": "proving on a GPU worker",
    "finalizing": "assembling and verifying the proof",
    "done": "proved",
    "failed": "failed (see its errors)",
    "cancelled": "cancelled with its job",
}


def legend() -> dict[str, list[dict[str, str]]]:
    """The colour legend: every partition state's cell colour, and the task stream's bar
    colour per kind (the owner hue the bars are drawn with)."""
    from engine.states import PartitionState, ProofKind

    return {"states": [{"state": str(s), "meaning": STATE_MEANING.get(str(s), str(s.label))} for s in PartitionState],
            "kinds": [{"kind": str(k), "colour": kind_colour(str(k))} for k in ProofKind]}
