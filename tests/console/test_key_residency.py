"""A job's page says where its proving key is resident: each running host holding it, hot
before warm, as chips with data- attributes, and follows a key loaded on another host."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.test import Client
from django.utils import timezone

from engine.models import EngineHost, ProofJob
from engine.states import ProofKind
from tests.console.conftest import SNAP_ID, Farm, bump_version
from tests.console.test_stream import connected, db, hint, run

pytestmark = pytest.mark.django_db(transaction=True)

SNAP_KEY = "snap-update/tiny"  # the farm's gpu-host-a holds it hot (no tier named: the one tier before tiers)


@pytest.fixture
def snap_of_its_circuit(farm: Farm) -> Farm:
    ProofJob.objects.filter(job_id=SNAP_ID).update(circuit_id=SNAP_KEY)
    return farm


def key_line(html: str) -> str:
    return html.split('id="job-key-residency"', 1)[1].split("</div>", 1)[0]


def load_key_on_host_b(tier: str) -> int:
    """gpu-host-b, running, lists the key at ``tier``: its engine's write when the key loads."""
    with transaction.atomic():
        version = bump_version()
        EngineHost.objects.update_or_create(name="gpu-host-b", defaults={
            "started_at": timezone.now(), "heartbeat_at": timezone.now(), "version": version,
            "key_cache": [{"circuit_id": SNAP_KEY, "bytes": 2**30, "tier": tier}]})
    return version


def test_the_job_page_names_the_hosts_holding_its_key_hot_before_warm(staff: Client, snap_of_its_circuit: Farm) -> None:
    load_key_on_host_b("warm")
    line = key_line(staff.get(f"/jobs/{SNAP_ID}").content.decode())
    assert f'data-circuit="{SNAP_KEY}" data-hosts="gpu-host-a:hot gpu-host-b:warm"' in line
    assert "key resident on: " in line
    assert line.index('data-host="gpu-host-a" data-tier="hot">gpu-host-a (hot)') < line.index(
        'data-host="gpu-host-b" data-tier="warm">gpu-host-b (warm)')


def test_a_stopped_host_s_keys_are_resident_nowhere(staff: Client, snap_of_its_circuit: Farm) -> None:
    EngineHost.objects.filter(name="gpu-host-a").update(stopped_at=timezone.now())
    line = key_line(staff.get(f"/jobs/{SNAP_ID}").content.decode())
    assert 'data-hosts=""' in line and "no host" in line


def test_an_uploaded_key_is_its_job_s_own(staff: Client, farm: Farm) -> None:
    ProofJob.objects.filter(job_id=SNAP_ID).update(kind=ProofKind.CUSTOM, circuit_id="custom/0123456789abcdef")
    assert "its own uploaded key" in key_line(staff.get(f"/jobs/{SNAP_ID}").content.decode())


def test_a_key_loaded_on_another_host_reaches_the_open_job_page(snap_of_its_circuit: Farm,
                                                               staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user, query=urlencode({"job": SNAP_ID}).encode()) as stream:
            first = await stream.update()
            assert 'data-hosts="gpu-host-a:hot"' in first["html"]
            version = await db(load_key_on_host_b)("hot")
            await hint(version, host="gpu-host-b")
            update = await stream.update()
            assert update["ids"] == ["job-key-residency"]
            assert 'data-hosts="gpu-host-a:hot gpu-host-b:hot"' in update["html"]
    run(scenario)
