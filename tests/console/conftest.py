"""A small farm in the records, and logins for the console's two kinds of viewer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client
from django.utils import timezone

from engine.api.auth import OPERATOR_GROUP
from engine.console.consumers import HUB
from engine.ledger.clock import ensure_clock, next_stamp
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import PARTITION_LIVE, JobState, PartitionState, ProofKind
from engine.status.host_report import DeviceReport, KeyReport

SNAP_ID = "snap-update-f01234-sector-000042-deadline-7"


@dataclass
class Farm:
    host: EngineHost
    w0: Worker
    w1: Worker
    snap: ProofJob


def bump_version() -> int:
    """What a writer does with every change: the next value of its clock (here the web's, the
    only clock of this farm, so its value is the farm's version too)."""
    ensure_clock()
    return next_stamp().version


def move(job_id: str, index: int, state: str, **fields: object) -> int:
    """Apply one partition transition and its version in one transaction, as the writer does.
    A claimed state names a host: the job's, unless one is given."""
    with transaction.atomic():
        if state in PARTITION_LIVE and "host" not in fields:
            fields["host_id"] = ProofJob.objects.get(job_id=job_id).host_id
        version = bump_version()
        Partition.objects.filter(job__job_id=job_id, index=index).update(state=state, version=version, **fields)
    return version


@pytest.fixture(autouse=True)
def fresh_renders() -> None:
    HUB.clear()


@pytest.fixture
def farm() -> Farm:
    now = timezone.now()
    host = EngineHost.objects.create(
        name="gpu-host-a", backend="cuda", started_at=now - timedelta(minutes=3), heartbeat_at=now,
        memory_budget_bytes=64 * 2**30, synthesis_max=4,
        devices=[DeviceReport("cuda:0", "", 141 * 2**30, 100 * 2**30, 30 * 2**30).to_json()],
        key_cache=[KeyReport("snap-update/tiny", 4 * 2**30).to_json(), KeyReport("porep-c2/tiny", 2**30).to_json()],
    )
    w0 = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    w1 = Worker.objects.create(host=host, device="cuda:0", ordinal=1)
    snap = ProofJob.objects.create(job_id=SNAP_ID, kind=ProofKind.SNAP_UPDATE, state=JobState.RUNNING,
                                   num_partitions=16, host=host, started_at=now - timedelta(seconds=20))
    for index in range(16):
        Partition.objects.create(job=snap, index=index)
    ms = timedelta(milliseconds=1)
    t0 = now - timedelta(seconds=15)
    Partition.objects.filter(job=snap, index=0).update(
        host=host, state=PartitionState.DONE, worker=w0, attempt=1, synth_started_at=t0, synth_finished_at=t0 + 587 * ms,
        gpu_started_at=t0 + 600 * ms, gpu_finished_at=t0 + 5800 * ms, finished_at=t0 + 6000 * ms)
    Partition.objects.filter(job=snap, index=1).update(
        host=host, state=PartitionState.GPU, worker=w1, attempt=1, synth_started_at=t0, synth_finished_at=t0 + 700 * ms,
        gpu_started_at=now - timedelta(seconds=2))
    Partition.objects.filter(job=snap, index=2).update(
        host=host, state=PartitionState.SYNTH_DONE, attempt=1, synth_started_at=t0, synth_finished_at=t0 + 650 * ms)
    Partition.objects.filter(job=snap, index=3).update(
        host=host, state=PartitionState.SYNTHESIZING, attempt=1, synth_started_at=now - timedelta(milliseconds=300))
    Partition.objects.filter(job=snap, index=4).update(host=host, state=PartitionState.RESERVING, attempt=1)
    # P0 done; P1 on the GPU, P2 synthesized and P3 synthesizing hold 12 GiB each (36 GiB beside
    # the 4 GiB snap-update key); P4 is claimed and reserving; the rest are unclaimed.
    Partition.objects.filter(job=snap, index__lte=3).update(reserved_bytes=12 * 2**30)
    bump_version()
    return Farm(host, w0, w1, snap)


@pytest.fixture
def staff_user() -> User:
    return get_user_model().objects.create_user("ops-lead", password="pw-for-tests-only", is_staff=True)


@pytest.fixture
def operator_user() -> User:
    user = get_user_model().objects.create_user("night-shift", password="pw-for-tests-only")
    # Made by migration 0004, but a transactional test before this one flushed it.
    Group.objects.get_or_create(name=OPERATOR_GROUP)[0].user_set.add(user)
    return user


@pytest.fixture
def staff(staff_user: User) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def strict(user: User) -> Client:
    """A browser as Django's CSRF check sees it (the test client skips the check by default)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client
