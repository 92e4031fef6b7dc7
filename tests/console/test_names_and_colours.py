"""What a newcomer reads on the console (issue 48's points 3, 6, 7 and 10): a registered circuit
by its name, never only its 64 hex digits; colours that say one thing each; moments, curves and
counts written one way."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from engine.console.style import KIND_HUES, circuit_label, owner_colour
from engine.models import Circuit, ProofJob
from engine.states import JobState, ProofKind
from engine.status.host_report import KeyReport
from tests.console.conftest import Farm, bump_version

pytestmark = pytest.mark.django_db

ZKEY_SHA = "9f20639d4d067a064a37434ce843d870b6f0d3041f8d1248e37d9f8f1b9cd1c4"
CIRCUIT_ID = f"circom/{ZKEY_SHA}"


@pytest.fixture
def circom_job(farm: Farm) -> ProofJob:
    """A registered circuit "multiplier.zkey" whose key the host holds, and a job proving with it."""
    Circuit.objects.create(id=ZKEY_SHA, name="multiplier.zkey", curve="bn128", n_public=1, n_vars=4, domain_size=8,
                           zkey_path="/nonexistent/circuit.zkey", zkey_bytes=1024)
    farm.host.key_cache = [*farm.host.key_cache, KeyReport(CIRCUIT_ID, 3 * 2**20).to_json()]
    farm.host.save(update_fields=["key_cache"])
    job = ProofJob.objects.create(job_id="circom-one", kind=ProofKind.CUSTOM, state=JobState.QUEUED, num_partitions=1,
                                  circuit_id=CIRCUIT_ID, curve="bn128", submitted_at=timezone.now())
    job.partitions.create(index=0)
    bump_version()
    return job


def test_the_console_names_a_registered_circuit_by_its_name_and_keeps_its_id_in_a_title(
        staff: Client, circom_job: ProofJob) -> None:
    html = staff.get("/").content.decode()
    chip = re.search(rf'<span class="chip [^"]*"[^>]*data-circuit="{CIRCUIT_ID}"[^>]*title="([^"]*)"[^>]*>'
                     r'<span class="chip-name">([^<]*)</span>', html)
    assert chip is not None and chip.group(2) == "multiplier.zkey" and CIRCUIT_ID in chip.group(1)
    assert f'<span class="circuit" title="{CIRCUIT_ID}">multiplier.zkey</span>' in html  # its pipeline's head
    shown = re.sub(r'"[^"]*"', '""', html)  # the text a reader sees, attributes aside
    assert ZKEY_SHA not in shown


def test_the_job_page_names_the_circuit_says_what_its_id_is_and_names_the_curve_both_ways(
        staff: Client, circom_job: ProofJob) -> None:
    html = staff.get(f"/jobs/{circom_job.job_id}").content.decode()
    assert f'circuit <span class="circuit" title="{CIRCUIT_ID}" data-circuit="{CIRCUIT_ID}">multiplier.zkey</span>' in html
    assert "registered circom circuit: circom/ and its zkey&#x27;s SHA-256" in html
    assert '<span class="curve" data-curve="bn128">BN254 (bn128)</span>' in html


def test_a_circuit_without_a_name_is_shown_by_the_start_of_its_id() -> None:
    assert circuit_label(CIRCUIT_ID, {}) == f"circom/{ZKEY_SHA[:12]}…"
    assert circuit_label("snap-update/tiny", {}) == "snap-update/tiny"
    assert circuit_label("custom/0123456789abcdef", {}) == "custom/0123456789abcdef"


def test_a_memory_owner_wears_its_kinds_hue_only_when_it_is_a_job_of_that_kind() -> None:
    def hue(colour: str) -> int:
        return int(colour.removeprefix("hsl(").split()[0])

    def saturation(colour: str) -> int:
        return int(colour.split()[1].rstrip("%"))

    assert hue(owner_colour("snap-update some-job", "job")) == KIND_HUES["snap-update"]
    for owner, holder in (("key:snap-update/tiny", "key"), ("key:porep-c2/tiny", "key"), (f"key:{CIRCUIT_ID}", "key"),
                          ("engine processes", "engine"), ("compiled snap-update/tiny in synthesis-1", "engine")):
        assert saturation(owner_colour(owner, holder)) <= 15, (owner, owner_colour(owner, holder))


def test_idle_synthesis_is_said_calmly_and_a_held_back_host_as_a_warning(staff: Client, farm: Farm) -> None:
    farm.snap.partitions.update(state="done")
    farm.host.draining = False
    bump_version()
    idle = staff.get("/").content.decode()
    assert '<span class="reason-why calm" data-synthesis-reason>idle: nothing pending</span>' in idle
    farm.host.draining = True
    farm.host.save(update_fields=["draining"])
    bump_version()
    drained = staff.get("/").content.decode()
    assert '<span class="reason-why" data-synthesis-reason>draining: claims nothing new</span>' in drained


def test_counts_are_written_in_the_singular_for_one(staff: Client, farm: Farm) -> None:
    ProofJob.objects.create(job_id="waiting", kind=ProofKind.WINNING_POST, state=JobState.QUEUED, num_partitions=1,
                            submitted_at=timezone.now()).partitions.create(index=0)
    farm.snap.partitions.exclude(state="pending").update(state="done")
    farm.snap.partitions.filter(state="pending").update(state="done")
    bump_version()
    html = staff.get("/").content.decode()
    assert "queue depth: <strong data-queue-depth>1</strong> job · <span data-pending-partitions>1</span> partition pending" in html


def test_the_jobs_table_and_the_job_page_write_moments_in_utc_saying_so(staff: Client, farm: Farm) -> None:
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    ProofJob.objects.filter(pk=farm.snap.pk).update(submitted_at=at)
    written = f"{at:%Y-%m-%d %H:%M:%S} UTC"
    assert written in staff.get("/jobs/").content.decode()
    assert written in staff.get(f"/jobs/{farm.snap.job_id}").content.decode()
