"""What a host reports about itself in its row's JSON columns, as types.

The engine writes ``EngineHost.devices``, ``EngineHost.key_cache`` and ``EngineHost.figures`` through ``to_json`` and
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


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
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
    bytes: int = 0  # what the key holds in the host's memory budget at its tier
    loaded_at: datetime | None = None
    tier: str = "hot"  # hot (in memory) or warm (its points memory-mapped); a cold key is not listed
    last_used_at: datetime | None = None
    load_seconds: float | None = None  # its last load from disk
    mapped_bytes: int = 0  # warm: the mapped image's size, read on demand, not in ``bytes``

    def to_json(self) -> dict[str, Any]:
        return {"circuit_id": self.circuit_id, "bytes": self.bytes,
                "loaded_at": self.loaded_at.isoformat() if self.loaded_at else None, "tier": self.tier,
                "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
                "load_seconds": self.load_seconds, "mapped_bytes": self.mapped_bytes}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> KeyReport:
        tier = entry.get("tier")
        return cls(circuit_id=str(entry.get("circuit_id") or "?"), bytes=_int_or_none(entry.get("bytes")) or 0,
                   loaded_at=_datetime_or_none(entry.get("loaded_at")),
                   tier=tier if tier in ("hot", "warm", "cold") else "hot",
                   last_used_at=_datetime_or_none(entry.get("last_used_at")),
                   load_seconds=_float_or_none(entry.get("load_seconds")),
                   mapped_bytes=_int_or_none(entry.get("mapped_bytes")) or 0)


@dataclass(frozen=True)
class DeviceFigures:
    """One CUDA device as NVML measured it at a heartbeat. A figure NVML would not give (power
    on a board without a sensor) is None, never 0: a zero would read as an idle device."""

    device: str  # cuda:N, as the engine's workers name it
    utilisation_percent: float | None = None  # of the last sample period NVML kept a kernel running
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_watts: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> DeviceFigures:
        return cls(device=str(entry.get("device") or "?"),
                   utilisation_percent=_float_or_none(entry.get("utilisation_percent")),
                   memory_used_bytes=_int_or_none(entry.get("memory_used_bytes")),
                   memory_total_bytes=_int_or_none(entry.get("memory_total_bytes")),
                   power_watts=_float_or_none(entry.get("power_watts")))


@dataclass(frozen=True)
class ThreadDown:
    """An engine thread backing off after a database error (engine.pipeline.supervise), as the
    heartbeat found it."""

    thread: str
    since: datetime | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"thread": self.thread, "since": self.since.isoformat() if self.since else None, "error": self.error}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> ThreadDown:
        return cls(thread=str(entry.get("thread") or "?"), since=_datetime_or_none(entry.get("since")),
                   error=str(entry.get("error") or ""))


@dataclass(frozen=True)
class HostFigures:
    """The machine's own load, sampled every heartbeat beside the reservations the ledger
    records: what the host's CPUs and RAM are doing, whatever holds them. ``devices`` is empty
    where NVML is absent or failed (``nvml`` False): no device figures rather than zeros. Every
    figure is None until measured (the first CPU figure needs two samples)."""

    sampled_at: datetime | None = None
    cpu_percent: float | None = None  # the whole machine, 0..100 (every core busy: 100)
    cpu_count: int | None = None
    memory_used_bytes: int | None = None  # total less what the kernel calls available
    memory_total_bytes: int | None = None
    engine_rss_bytes: int | None = None  # the engine process and its children (synthesis pool)
    nvml: bool = False
    devices: tuple[DeviceFigures, ...] = ()
    threads_down: tuple[ThreadDown, ...] = ()  # the engine's threads down at the heartbeat

    @property
    def measured(self) -> bool:
        return self.sampled_at is not None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sampled_at"] = self.sampled_at.isoformat() if self.sampled_at else None
        out["devices"] = [d.to_json() for d in self.devices]
        out["threads_down"] = [t.to_json() for t in self.threads_down]
        return out

    @classmethod
    def from_json(cls, entry: Any) -> HostFigures:
        if not isinstance(entry, dict):
            return cls()
        devices, down = entry.get("devices"), entry.get("threads_down")
        return cls(sampled_at=_datetime_or_none(entry.get("sampled_at")),
                   cpu_percent=_float_or_none(entry.get("cpu_percent")),
                   cpu_count=_int_or_none(entry.get("cpu_count")),
                   memory_used_bytes=_int_or_none(entry.get("memory_used_bytes")),
                   memory_total_bytes=_int_or_none(entry.get("memory_total_bytes")),
                   engine_rss_bytes=_int_or_none(entry.get("engine_rss_bytes")),
                   nvml=entry.get("nvml") is True,
                   devices=tuple(DeviceFigures.from_json(d) for d in devices or [] if isinstance(d, dict))
                   if isinstance(devices, list) else (),
                   threads_down=tuple(ThreadDown.from_json(t) for t in down if isinstance(t, dict))
                   if isinstance(down, list) else ())


def devices_of(column: Iterable[Any] | None) -> list[DeviceReport]:
    return [DeviceReport.from_json(e) for e in column or [] if isinstance(e, dict)]


def keys_of(column: Iterable[Any] | None) -> list[KeyReport]:
    return [KeyReport.from_json(e) for e in column or [] if isinstance(e, dict)]
