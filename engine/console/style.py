"""How the console colours and labels what it shows: gauge levels, owner hues, device slots,
circuits by name."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from engine.status.records import CIRCOM


def level(fraction: float) -> str:
    """Gauge colour at the seed panel's thresholds: green, amber from 60 %, red from 85 %."""
    return "red" if fraction >= 0.85 else "amber" if fraction >= 0.60 else "green"


# Each proof kind's bar colour, chosen rather than hashed: hashed hues put winning-post beside
# snap-update and porep-c2 beside custom, and some near `done`'s green (hue 120). These are
# at least 45 degrees from each other and from green.
KIND_HUES = {"winning-post": 285, "window-post": 30, "porep-c2": 195, "snap-update": 335, "custom": 75}


def kind_colour(kind: str) -> str:
    hue = KIND_HUES.get(kind)
    return f"hsl({_hashed(kind) % 360} 60% 58%)" if hue is None else f"hsl({hue} 60% 58%)"


def _hashed(text: str) -> int:
    return zlib.crc32(text.encode())


def owner_colour(owner: str, holder: str) -> str:
    """A memory owner's colour, stable across renders and never a kind's for an owner that is no
    job of that kind: a job's reservation is its kind's hue (a lightness of its own per job, so
    two jobs of one kind stay apart); a key is a slate grey-blue and the engine's own a plain
    grey, each a lightness of its own per owner (engine.status.holdings.holder_of says which)."""
    shade = 42 + _hashed(owner) % 5 * 7  # 42 … 70 %
    if holder == "job":
        kind = owner.split(" ", 1)[0]
        hue = KIND_HUES.get(kind, _hashed(kind) % 360)
        return f"hsl({hue} 55% {shade}%)"
    if holder == "key":
        return f"hsl(215 12% {shade}%)"
    return f"hsl(0 0% {shade}%)"


def device_slot(device: str, backend: str) -> str:
    return "CPU" if device == "cpu" or backend == "cpu" else device


CUSTOM = "custom/"  # a zkey uploaded with its job (POST /api/v1/jobs/custom): custom/<first 16 hex digits>
SHORT_ID = 12  # hex digits of a registered circuit's id shown where it has no name


def circuit_label(circuit_id: str, names: Mapping[str, str]) -> str:
    """How a page names a circuit: a registered circuit by the name it was registered with
    (``names``: engine.status.read_model.Farm.circuit_names), or by the start of its id where it
    has none; a kind's (``snap-update/tiny``) and a job's own upload (``custom/…``) by their id."""
    if circuit_id in names:
        return names[circuit_id]
    if circuit_id.startswith(CIRCOM) and len(circuit_id) > len(CIRCOM) + SHORT_ID:
        return f"{circuit_id[:len(CIRCOM) + SHORT_ID]}…"
    return circuit_id


# What each partition state's colour means, in the legend under the cells.
STATE_MEANING = {
    "pending": "waiting to be claimed",
    "reserving": "claimed by a host, waiting for its proving key, its memory or its synthesis process",
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


def circuit_note(circuit_id: str) -> str:
    """What a circuit id says, for a page that shows one: the two families of a client's own
    circuits are told apart by their prefix."""
    if circuit_id.startswith(CIRCOM):
        return "registered circom circuit: circom/ and its zkey's SHA-256"
    if circuit_id.startswith(CUSTOM):
        return "uploaded with the job: custom/ and the first 16 hex digits of its zkey's SHA-256"
    return ""
