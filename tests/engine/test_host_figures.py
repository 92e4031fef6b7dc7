"""The host's own figures: a real engine's heartbeat measures the machine (psutil) and, where
NVML answers, each CUDA device; /status, /metrics and the host card show what it wrote.

This machine has no GPU, so the path without NVML is the one a real engine takes here; NVML's
mapping to figures is checked against a tiny stand-in for the NVML module alone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import psutil
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from engine.api.metrics import RecordsCollector
from engine.console.render import render
from engine.models import EngineHost
from engine.pipeline.devices import Device
from engine.pipeline.host_figures import CpuLoad, HostSampler, Nvml
from engine.status.farm import farm_snapshot
from engine.status.host_report import DeviceFigures, HostFigures
from tests.engine.conftest import wait_until

P_WATTS = 412_345  # NVML reports milliwatts


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordsCollector())
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.django_db(transaction=True)
def test_a_real_heartbeat_writes_the_machines_figures_and_every_view_shows_them(start_engine) -> None:
    engine = start_engine()
    name = engine.host.name

    def figures() -> HostFigures:
        return HostFigures.from_json(EngineHost.objects.get(name=name).figures)

    wait_until(lambda: figures().cpu_percent is not None and figures().engine_rss_bytes, timeout=10)
    measured = figures()
    assert measured.sampled_at is not None
    assert measured.cpu_percent is not None and 0.0 <= measured.cpu_percent <= 100.0
    assert measured.cpu_count == psutil.cpu_count()
    total = psutil.virtual_memory().total
    assert measured.memory_total_bytes == total
    assert measured.memory_used_bytes is not None and 0 < measured.memory_used_bytes <= total
    # This process is the engine's (its threads run here), so its own RSS is a floor.
    assert measured.engine_rss_bytes is not None
    assert psutil.Process(os.getpid()).memory_info().rss // 2 < measured.engine_rss_bytes <= total
    assert measured.nvml is False and measured.devices == ()  # no GPU, no NVML here: nothing, not zeros

    [host] = [h for h in farm_snapshot()["hosts"] if h["name"] == name]
    shown = host["figures"]
    assert shown["cpu_count"] == psutil.cpu_count() and shown["memory_total_bytes"] == total
    assert 0.0 <= shown["cpu_percent"] <= 100.0 and 0 < shown["memory_used_bytes"] <= total
    assert shown["nvml"] is False and shown["devices"] == []

    series = scrape()
    assert 0.0 <= series[("provingsite_host_cpu_percent", (("host", name),))] <= 100.0
    assert series[("provingsite_host_memory_total_bytes", (("host", name),))] == total
    assert 0 < series[("provingsite_host_memory_used_bytes", (("host", name),))] <= total
    assert series[("provingsite_engine_rss_bytes", (("host", name),))] > 0
    assert not [key for key in series if key[0].startswith("provingsite_device_")], \
        "a host without NVML reported device figures"

    card = render(["hosts"]).html("hosts")
    card = card.split(f'data-host="{name}"', 1)[1].split("</li>", 1)[0]
    assert 'data-figure="cpu">CPU ' in card and f"of {psutil.cpu_count()}" in card
    assert 'data-figure="ram">RAM ' in card and 'data-figure="engine-rss">engine ' in card
    assert "data-device" not in card and "no NVML" not in card  # a CPU host: no device figures, no excuse


# ---- NVML, at its boundary only --------------------------------------------------------------


class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """The few NVML calls the sampler makes, answering for two boards on the PCI bus: one with
    a power sensor, one without."""

    NVMLError = FakeNvmlError

    def __init__(self, starts: bool = True) -> None:
        self.starts = starts
        self.started = self.stopped = False

    def nvmlInit(self) -> None:
        self.started = True
        if not self.starts:
            raise FakeNvmlError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.stopped = True

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> str:
        if bus_id not in ("0000:3b:00.0", "0000:5e:00.0"):
            raise FakeNvmlError("Not Found")
        return bus_id

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return ["0000:3b:00.0", "0000:5e:00.0"][index]

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:
        return type("Utilization", (), {"gpu": 87 if handle == "0000:3b:00.0" else 3, "memory": 40})()

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:
        return type("Memory", (), {"used": 30 << 30, "total": 141 << 30, "free": 111 << 30})()

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        if handle == "0000:5e:00.0":
            raise FakeNvmlError("Not Supported")
        return P_WATTS


GPUS = [Device("cuda:0", "H200", "0000:5e:00.0"), Device("cuda:1", "H200", "0000:3b:00.0")]


def test_nvml_figures_are_mapped_to_the_engines_devices_by_pci_bus_not_by_index() -> None:
    # CUDA numbered the boards fastest first; NVML finds each by its bus id.
    nvml = Nvml.open(GPUS, FakeNvml())
    assert nvml is not None
    by_device = {d.device: d for d in nvml.sample()}
    assert by_device["cuda:1"] == DeviceFigures("cuda:1", 87.0, 30 << 30, 141 << 30, 412.3)
    # No power sensor on that board: its power is unknown, not 0 W.
    assert by_device["cuda:0"] == DeviceFigures("cuda:0", 3.0, 30 << 30, 141 << 30, None)


def test_a_device_without_a_bus_id_is_found_by_its_index() -> None:
    nvml = Nvml.open([Device("cuda:1", "H200")], FakeNvml())
    assert nvml is not None and [d.utilisation_percent for d in nvml.sample()] == [3.0]


def test_nvml_that_will_not_start_leaves_the_host_without_device_figures() -> None:
    fake = FakeNvml(starts=False)
    sampler = HostSampler(GPUS, nvml=fake)
    figures = sampler.sample()
    assert fake.started and figures.nvml is False and figures.devices == ()
    assert figures.memory_total_bytes == psutil.virtual_memory().total  # the host's own figures still come


def test_a_cpu_host_never_asks_nvml() -> None:
    fake = FakeNvml()
    assert Nvml.open([Device("cpu", "CPU")], fake) is None
    assert not fake.started


def test_the_sampler_lets_nvml_go_when_the_engine_stops() -> None:
    fake = FakeNvml()
    sampler = HostSampler(GPUS, nvml=fake)
    assert sampler.sample().nvml is True
    sampler.close()
    assert fake.stopped and sampler.sample().devices == ()


# ---- the figures as records -------------------------------------------------------------------


def test_cpu_load_is_a_share_of_every_cpu_between_two_calls() -> None:
    load = CpuLoad()
    sum(i * i for i in range(200_000))  # let some CPU time pass
    percent = load.percent()
    assert percent is None or 0.0 <= percent <= 100.0


def test_figures_read_back_as_written_and_a_hand_edited_row_as_unmeasured() -> None:
    figures = HostFigures(sampled_at=datetime(2026, 12, 5, 3, 0, tzinfo=UTC), cpu_percent=37.5, cpu_count=16,
                          memory_used_bytes=12 << 30, memory_total_bytes=64 << 30, engine_rss_bytes=2 << 30, nvml=True,
                          devices=(DeviceFigures("cuda:0", 87.0, 30 << 30, 141 << 30, None),))
    assert HostFigures.from_json(figures.to_json()) == figures
    assert not HostFigures.from_json("garbage").measured
    assert HostFigures.from_json({"cpu_percent": "n/a", "devices": [1, {"device": "cuda:0"}]}) == \
        HostFigures(devices=(DeviceFigures("cuda:0"),))
