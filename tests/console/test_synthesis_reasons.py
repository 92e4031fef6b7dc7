"""The synthesis panel says why synthesis is not running more, from the rows it shows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from engine.console import render as rendering
from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition
from engine.states import PartitionState
from engine.status.records import current_version
from tests.console.conftest import Farm
from tests.console.test_stream import connected, db, hint, run

pytestmark = pytest.mark.django_db

P = PartitionState


def panel() -> str:
    """The synthesis panel's text, tags dropped and spaces collapsed."""
    html = rendering.render(["synthesis"]).html("synthesis")
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def test_a_claim_waiting_for_its_key_and_memory_says_reserving(farm: Farm) -> None:
    text = panel()  # the fixture's P4 is claimed and reserving; P5 to P15 are unclaimed
    assert "1/4 active" in text
    assert "11 pending: reserving key and memory for 1 claimed (41.0 GiB of 64.0 GiB held)" in text


def test_a_host_whose_synthesized_work_fills_the_pacer_says_paced(farm: Farm) -> None:
    # The pacer's target: 4 synthesis slots + 2 per GPU worker (2 workers) = 8; one is
    # synthesizing, so 7 synthesized partitions waiting for the GPU stop its claiming.
    Partition.objects.filter(job=farm.snap, index__in=range(4, 10)).update(
        host=farm.host, state=P.SYNTH_DONE, synth_started_at=timezone.now(), synth_finished_at=timezone.now())
    assert "6 pending: paced: 7 synthesized partitions wait for the GPU" in panel()


def test_nothing_pending_and_nothing_synthesizing_says_idle(farm: Farm) -> None:
    Partition.objects.filter(job=farm.snap).exclude(state=P.DONE).update(state=P.DONE)
    text = panel()
    assert "0/4 active" in text and "0 pending: idle: nothing pending" in text


def test_a_drained_host_says_it_claims_nothing_new(farm: Farm) -> None:
    EngineHost.objects.filter(pk=farm.host.pk).update(draining=True)
    assert "11 pending: draining: claims nothing new" in panel()


def test_every_slot_synthesizing_gives_no_reason(farm: Farm) -> None:
    Partition.objects.filter(job=farm.snap, index__in=range(4, 7)).update(
        host=farm.host, state=P.SYNTHESIZING, synth_started_at=timezone.now())
    text = panel()
    assert "4/4 active" in text and text.endswith("9 pending")


@pytest.mark.django_db(transaction=True)
def test_a_submitted_job_refreshes_the_pending_count_on_the_stream(farm: Farm, staff_user: AbstractBaseUser) -> None:
    def submit() -> int:
        submit_job(kind="porep-c2", job_id="porep-c2-fresh", inputs={"n": 1}, num_partitions=3)
        return current_version()

    async def scenario() -> None:
        async with connected(staff_user) as stream:
            assert "<span data-synthesis-pending>11</span> pending" in (await stream.update())["html"]
            version = await db(submit)()
            await hint(version, job="porep-c2-fresh")
            update = await stream.update()
            assert "frag-synthesis" in update["ids"]
            assert '<span data-synthesis-pending>14</span> pending' in update["html"]
    run(scenario)
