"""The host card: the machine's measured figures beside its name, from its last heartbeat."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from engine.models import EngineHost
from engine.status.host_report import DeviceFigures, HostFigures
from tests.console.conftest import Farm

pytestmark = pytest.mark.django_db


def card(client: Client, host: str) -> str:
    html = client.get("/").content.decode()
    hosts = html.split('id="frag-hosts"', 1)[1].split("</section>", 1)[0]
    return hosts.split(f'data-host="{host}"', 1)[1].split("</li>", 1)[0]


def measure(host: EngineHost, **figures: Any) -> None:
    EngineHost.objects.filter(pk=host.pk).update(figures=HostFigures(sampled_at=timezone.now(), **figures).to_json())


def test_the_host_card_shows_cpu_ram_the_engine_and_each_device_nvml_measured(staff: Client, farm: Farm) -> None:
    measure(farm.host, cpu_percent=37.5, cpu_count=64, memory_used_bytes=90 << 30, memory_total_bytes=128 << 30,
            engine_rss_bytes=20 << 30, nvml=True, devices=(DeviceFigures("cuda:0", 87.0, 60 << 30, 141 << 30, 412.3),))
    shown = card(staff, "gpu-host-a")
    assert "sampled every heartbeat" in shown
    assert "CPU 38% of 64" in shown and "RAM 90.0 GiB / 128.0 GiB" in shown and "engine 20.0 GiB" in shown
    assert "cuda:0 87% · 60.0 GiB / 141.0 GiB · 412 W" in shown
    assert 'class="figure ram red"' not in shown and 'class="figure ram amber"' in shown  # 70 % of the RAM


def test_a_gpu_host_without_nvml_shows_no_device_figures_rather_than_zeros(staff: Client, farm: Farm) -> None:
    measure(farm.host, cpu_percent=5.0, cpu_count=64, memory_used_bytes=1 << 30, memory_total_bytes=128 << 30,
            engine_rss_bytes=1 << 30)
    shown = card(staff, "gpu-host-a")
    assert "data-device" not in shown and " 0%" not in shown and "0 W" not in shown
    assert "no NVML: device utilisation not measured" in shown


def test_a_host_not_measured_yet_shows_no_figures(staff: Client, farm: Farm) -> None:
    assert "host-figures" not in card(staff, "gpu-host-a")
