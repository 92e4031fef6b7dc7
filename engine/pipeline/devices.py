"""Which devices this host proves on: every CUDA device CuPy sees, else one CPU slot."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.env import ConfigError
from engine.pipeline.memory import gpu_memory
from engine.status.host_report import DeviceReport

log = logging.getLogger("engine.devices")


class DeviceUnavailable(ConfigError):
    """A device the configuration names is not on this machine."""


@dataclass(frozen=True)
class Device:
    name: str  # "cuda:0" … or "cpu"
    label: str  # the product name an operator recognises
    # "0000:3b:00.0": how NVML finds the same device (engine.pipeline.host_figures); "" if unknown.
    pci_bus_id: str = ""

    @property
    def is_gpu(self) -> bool:
        return self.name.startswith("cuda:")


def cuda_devices() -> list[Device]:
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        found = []
        for i in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props.get("name", b"")
            found.append(Device(f"cuda:{i}", name.decode() if isinstance(name, bytes) else str(name), _pci_bus_id(props)))
        return found
    except Exception as exc:  # no CuPy, no driver or no device: the CPU backend serves
        log.debug("no CUDA devices: %s", exc)
        return []


def _pci_bus_id(props: dict[str, object]) -> str:
    try:
        domain, bus, device = (int(str(props[k])) for k in ("pciDomainID", "pciBusID", "pciDeviceID"))
    except (KeyError, ValueError):
        return ""
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def discover(setting: str) -> list[Device]:
    """``auto``: every CUDA device, else one CPU slot; or an explicit list ("cuda:0,cuda:1", "cpu")."""
    if setting.strip().lower() == "auto":
        return cuda_devices() or [Device("cpu", "CPU")]
    names = [n.strip().lower() for n in setting.split(",") if n.strip()]
    if not names:
        raise DeviceUnavailable("no devices named; use auto, cpu or cuda:0,cuda:1")
    available = {d.name: d for d in cuda_devices()} if any(n.startswith("cuda:") for n in names) else {}
    out = []
    for name in names:
        if name == "cpu":
            out.append(Device("cpu", "CPU"))
        elif name in available:
            out.append(available[name])
        else:
            raise DeviceUnavailable(f"device {name!r} is not available (found: {', '.join(available) or 'no CUDA devices'})")
    return out


def backend_of(devices: list[Device]) -> str:
    return "cuda" if any(d.is_gpu for d in devices) else "cpu"


def device_report(devices: list[Device]) -> list[dict[str, object]]:
    """What the heartbeat records per device (memory from CuPy, n/a on the CPU)."""
    report = []
    for d in devices:
        mem = gpu_memory(d.name)
        report.append(DeviceReport(d.name, d.label, mem["total"], mem["free"], mem["pool_used"]).to_json())
    return report
