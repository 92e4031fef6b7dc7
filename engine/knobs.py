"""The type of settings.PROVINGSITE, the engine's knobs (provingsite/settings.py), for the type
checker: each knob as its reader in engine.env returns it (sizes stay text: 'auto' or '64GiB').
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict


class Knobs(TypedDict):
    MEMORY_BUDGET: str
    MEMORY_SAFETY_MARGIN: str
    DEVICE_MEMORY_BUDGET: str
    DEVICE_MEMORY_MARGIN: str
    CHARGE_PROCESSES: bool
    FIXED_BASE: bool
    DEV_KEYS: bool
    SYNTHESIS_CONCURRENCY: int
    SYNTHESIS_NICE: int
    PACE_AHEAD: int
    CPU_MAX_DOMAIN: int
    WORKERS_PER_DEVICE: int
    DEVICES: str
    PARAMS_DIR: Path
    CACHE_DIR: Path
    SCALE: str
    HOST_NAME: str
    HEARTBEAT_SECONDS: float
    LEASE_SECONDS: float
    MAX_ATTEMPTS: int
    PLACEMENT: bool
    PLACEMENT_WAIT_S: float
    BATCH_MAX: int
    BATCH_WAIT_MS: float
    DRAIN_SECONDS: float
    WITNESS_SECONDS: float
    DEADLINE_OFFSETS: dict[str, float]
    CALLBACK_ALLOW: list[str]
    HOST_COST_PER_HOUR: float
    UPLOAD_LIMIT: str
    BODY_LIMIT: str
    TRUSTED_PROXIES: list[str]
    METRICS_TOKEN: str
    METRICS_ALLOW: list[str]
    LOAD_SHEDDING: bool
    API_RATE: float
    API_BURST: int
    API_OPERATOR_RATE: float
    API_OPERATOR_BURST: int
    ADMISSION_MAX_ACTIVE: int
    ADMISSION_MAX_WAITING: int
    ADMISSION_WAIT_SECONDS: float
