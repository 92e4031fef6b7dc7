"""What a host reports about itself in its row's JSON columns, as types.

The engine writes ``EngineHost.devices`` and ``EngineHost.key_cache`` through ``to_json`` and
every reader (``/status``, ``/metrics``, the console) parses them through ``from_json``: one
spelling of each field, written and read by the same code. A row written by an older engine
or edited by hand parses to what it can; an entry that is not an object is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any


def _datetime_or_none(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class DeviceReport:
    """A proving device; memory figures are None on the CPU backend (there is none to show)."""

    device: str
    label: str = ""
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    pool_used_bytes: int | None = None

    @property
    def memory_used_bytes(self) -> int | None:
        if self.memory_total_bytes and self.memory_free_bytes is not None:
            return self.memory_total_bytes - self.memory_free_bytes
        return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> DeviceReport:
        return cls(device=str(entry.get("device") or "?"), label=str(entry.get("label") or ""),
                   memory_total_bytes=_int_or_none(entry.get("memory_total_bytes")),
                   memory_free_bytes=_int_or_none(entry.get("memory_free_bytes")),
                   pool_used_bytes=_int_or_none(entry.get("pool_used_bytes")))


@dataclass(frozen=True)
class KeyReport:
    """A proving key resident in a host's key cache, as the engine writes it when the key is
    loaded or evicted (never from a heartbeat). Who uses it is not written here: readers derive
    it from the partitions claimed in the same snapshot (engine.status.holdings)."""

    circuit_id: str
    bytes: int = 0
    loaded_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {"circuit_id": self.circuit_id, "bytes": self.bytes,
                "loaded_at": self.loaded_at.isoformat() if self.loaded_at else None}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> KeyReport:
        return cls(circuit_id=str(entry.get("circuit_id") or "?"), bytes=_int_or_none(entry.get("bytes")) or 0,
                   loaded_at=_datetime_or_none(entry.get("loaded_at")))


def devices_of(column: Iterable[Any] | None) -> list[DeviceReport]:
    return [DeviceReport.from_json(e) for e in column or [] if isinstance(e, dict)]


def keys_of(column: Iterable[Any] | None) -> list[KeyReport]:
    return [KeyReport.from_json(e) for e in column or [] if isinstance(e, dict)]
