"""The machine's own figures, sampled every heartbeat: how busy its CPUs are, how much RAM is in
use, what the engine's processes hold, and per CUDA device what NVML measures.

The ledger records what the engine *reserved*; these say what the machine is *doing*, whoever
does it (another process can eat the RAM the budget counts on). They are samples, so they go
in the heartbeat with the devices' memory, never in a transition (engine.ledger.writer.beat).

NVML (nvidia-ml-py) is optional, as the GPU is: without the module, the driver's library or a
CUDA device, the host reports no device figures at all, never zeros that would read as an
idle GPU. psutil is a dependency of the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import psutil
from django.utils import timezone

from engine.pipeline.devices import Device
from engine.status.host_report import DeviceFigures, HostFigures

log = logging.getLogger("engine.devices")


def _nvml_module() -> ModuleType | None:
    try:
        import pynvml  # nvidia-ml-py, the `gpu` extra
    except ImportError:
        return None
    return pynvml


class CpuLoad:
    """The machine's CPU use between two calls, from psutil's cumulative CPU times.

    Kept here rather than psutil.cpu_percent(None), whose reference sample is per calling thread:
    the first beat runs on the thread that starts the engine and the rest on the heartbeat's, and
    a fresh thread's first answer is a meaningless 0.0."""

    def __init__(self) -> None:
        self._last = self._times()

    @staticmethod
    def _times() -> tuple[float, float]:
        t = psutil.cpu_times()
        # Linux counts guest time inside user and nice already: summing every field would
        # count it twice (psutil's own cpu_percent drops it the same way).
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        idle = t.idle + getattr(t, "iowait", 0.0)
        return total - idle, total

    def percent(self) -> float | None:
        """Busy share of every CPU since the last call, 0..100; None if no time has passed."""
        busy, total = self._times()
        (busy0, total0), self._last = self._last, (busy, total)
        if total <= total0:
            return None
        return round(min(max(100.0 * (busy - busy0) / (total - total0), 0.0), 100.0), 1)


class Nvml:
    """NVML's handles for the engine's CUDA devices, found by PCI bus id (CUDA numbers devices
    fastest first and through CUDA_VISIBLE_DEVICES; NVML by bus, so their indices differ)."""

    def __init__(self, nvml: Any, handles: dict[str, Any]) -> None:
        self.nvml = nvml
        self.handles = handles

    @classmethod
    def open(cls, devices: Sequence[Device], module: Any = None) -> Nvml | None:
        """NVML for these devices, or None where the module, the driver's library or a CUDA
        device is missing or NVML will not start (said once, at debug level: it is normal)."""
        gpus = [d for d in devices if d.is_gpu]
        if not gpus:
            return None
        nvml = module if module is not None else _nvml_module()
        if nvml is None:
            return None
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded …
            log.debug("NVML not available, no device figures: %s", exc)
            return None
        handles = {}
        for d in gpus:
            try:
                handles[d.name] = (nvml.nvmlDeviceGetHandleByPciBusId(d.pci_bus_id) if d.pci_bus_id
                                   else nvml.nvmlDeviceGetHandleByIndex(int(d.name.split(":")[1])))
            except Exception as exc:
                log.debug("NVML has no handle for %s: %s", d.name, exc)
        if not handles:
            cls._shutdown(nvml)
            return None
        return cls(nvml, handles)

    def sample(self) -> tuple[DeviceFigures, ...]:
        return tuple(self._device(name, handle) for name, handle in self.handles.items())

    def _device(self, name: str, handle: Any) -> DeviceFigures:
        # Each figure on its own: a board without a power sensor still has a utilisation.
        util = self._ask(lambda: float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        memory = self._ask(lambda: self.nvml.nvmlDeviceGetMemoryInfo(handle))
        milliwatts = self._ask(lambda: self.nvml.nvmlDeviceGetPowerUsage(handle))
        return DeviceFigures(device=name, utilisation_percent=util,
                             memory_used_bytes=int(memory.used) if memory is not None else None,
                             memory_total_bytes=int(memory.total) if memory is not None else None,
                             power_watts=round(milliwatts / 1000.0, 1) if milliwatts is not None else None)

    @staticmethod
    def _ask(call: Any) -> Any:
        try:
            return call()
        except Exception:  # NVMLError_NotSupported and kin: that figure is unknown, not zero
            return None

    def close(self) -> None:
        self._shutdown(self.nvml)

    @staticmethod
    def _shutdown(nvml: Any) -> None:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


class HostSampler:
    """One per engine: ``sample()`` at every heartbeat, ``close()`` when the engine stops."""

    def __init__(self, devices: Sequence[Device], nvml: Any = None) -> None:
        self._lock = threading.Lock()  # the first beat runs on the starting thread, the rest on the heartbeat's
        self._cpu = CpuLoad()
        self._me = psutil.Process()
        self._nvml = Nvml.open(devices, nvml)

    def sample(self) -> HostFigures:
        with self._lock:
            memory = psutil.virtual_memory()
            return HostFigures(
                sampled_at=timezone.now(), cpu_percent=self._cpu.percent(), cpu_count=psutil.cpu_count(),
                # "available" is what the kernel can hand out without swapping (page cache
                # included); psutil's "used" leaves out buffers and cache differently per OS.
                memory_used_bytes=memory.total - memory.available, memory_total_bytes=memory.total,
                engine_rss_bytes=self._tree_rss(), nvml=self._nvml is not None,
                devices=self._nvml.sample() if self._nvml is not None else ())

    def _tree_rss(self) -> int | None:
        """The engine's process and its children (the synthesis pool). Pages a forked child
        still shares with its parent count in both: an upper bound, as `ps` shows it."""
        try:
            total = self._me.memory_info().rss
        except psutil.Error:
            return None
        for child in self._me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:  # it ended between the listing and the read
                continue
        return total

    def close(self) -> None:
        with self._lock:
            if self._nvml is not None:
                self._nvml.close()
                self._nvml = None
