"""/jobs/<id> is live: its stream (/events/?job=<id>) swaps the job's head and rows by id."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.test import Client
from django.utils import timezone

from engine.console import fragments
from engine.ledger import job_log
from engine.ledger.job_log import Line
from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.console.conftest import SNAP_ID, Farm, bump_version, move
from tests.console.test_stream import Stream, connected, db, hint, run

pytestmark = pytest.mark.django_db(transaction=True)


def job_page_stream(user: Any, job_id: str) -> AbstractAsyncContextManager[Stream]:
    """The stream a job's page opens: /events/?job=<job_id>."""
    return connected(user, query=urlencode({"job": job_id}).encode())


VK_DIGEST = "5a" * 32


def finish_the_job() -> int:
    """Every partition proved and the job done, in one transaction, as the engine's writer does."""
    now = timezone.now()
    with transaction.atomic():
        version = bump_version()
        Partition.objects.filter(job__job_id=SNAP_ID).update(
            state=PartitionState.DONE, proof={"a": [1]}, public_inputs=["7"], synth_started_at=now - timedelta(seconds=3),
            synth_finished_at=now - timedelta(seconds=2), gpu_started_at=now - timedelta(seconds=2),
            gpu_finished_at=now - timedelta(seconds=1), finished_at=now, version=version)
        ProofJob.objects.filter(job_id=SNAP_ID).update(state=JobState.DONE, verified=True, finished_at=now,
                                                       vk_digest=VK_DIGEST, version=version)
    return version


def test_the_job_page_subscribes_to_its_own_stream_with_the_rows_it_renders(staff: Client, farm: Farm) -> None:
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    assert f'sse-connect="/events/?{urlencode({"job": SNAP_ID})}"' in html
    assert 'id="frag-job"' in html and 'id="job-detail-head"' in html
    assert all(f'id="jobpart-{index}"' in html for index in range(16))


def test_the_job_page_draws_each_partitions_stretches_on_one_timeline(staff: Client, farm: Farm) -> None:
    finish_the_job()
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    timeline = html.split('id="job-timeline"', 1)[1].split("</div>", 1)[0]
    assert timeline.count('class="seg gpu"') == 16 and timeline.count('class="seg synthesizing"') == 16
    assert "<title>P0 gpu 1.0s</title>" in timeline


def test_the_running_phases_on_the_job_page_tick_from_their_recorded_start(staff: Client, farm: Farm) -> None:
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    row = html.split('id="jobpart-1"', 1)[1].split('id="jobpart-2"', 1)[0]  # P1 is on the GPU
    gpu_started = Partition.objects.get(job=farm.snap, index=1).gpu_started_at
    assert gpu_started is not None
    assert f'data-started-at="{int(gpu_started.timestamp() * 1000)}"' in row
    done_row = html.split('id="jobpart-0"', 1)[1].split('id="jobpart-1"', 1)[0]  # P0 has finished: final figures
    assert "data-started-at" not in done_row and "5.2s" in done_row


def test_a_job_page_stream_opens_with_that_job_s_fragment_only(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with job_page_stream(staff_user, SNAP_ID) as stream:
            first = await stream.update()
            assert stream.status == 200
            assert first["ids"] == ["frag-job"]
            assert 'id="jobpart-15"' in first["html"]
    run(scenario)


def test_a_partition_transition_sends_the_job_page_only_its_row_and_the_stretch_it_closed(
        farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with job_page_stream(staff_user, SNAP_ID) as stream:
            await stream.update()
            version = await db(move)(SNAP_ID, 2, PartitionState.GPU, worker=farm.w0, gpu_started_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=2)
            update = await stream.update()
            assert sorted(update["ids"]) == ["job-timeline", "jobpart-2"]
            assert update["id"] == str(version)
            assert f'data-state="gpu" data-version="{version}"' in update["html"]
            assert "data-started-at" in update["html"]  # the GPU phase ticks in the browser
    run(scenario)


def test_the_job_finishing_shows_its_final_state_and_proof_links_without_a_reload(
        farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with job_page_stream(staff_user, SNAP_ID) as stream:
            first = await stream.update()
            assert "snarkjs.json" not in first["html"]
            version = await db(finish_the_job)()
            await hint(version, job=SNAP_ID)
            update = await stream.update()
            assert "job-detail-head" in update["ids"]
            head = update["html"].split('id="job-detail-head"', 1)[1].split("</div>", 1)[0]
            assert 'data-state="done"' in head and "verified under key" in head and "16/16 done" in head
            assert VK_DIGEST in head  # the key its proofs verified under, as the API names it
            assert f"/jobs/{SNAP_ID}/snarkjs.json" in head and f"/jobs/{SNAP_ID}/proofs.json" in head
            assert "data-started-at" not in head  # the total is final now, no longer ticking
    run(scenario)


def test_the_console_stream_carries_no_job_page_fragment_while_a_job_page_is_open(
        farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with job_page_stream(staff_user, SNAP_ID) as job_page, connected(staff_user) as console:
            await job_page.update()
            first = await console.update()
            assert "frag-job" not in first["ids"]
            assert sorted(first["ids"]) == sorted(f.dom_id for f in fragments.REGISTRY.values())
            version = await db(move)(SNAP_ID, 4, PartitionState.SYNTHESIZING, synth_started_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=4)
            assert "jobpart-4" not in (await console.update())["html"]
            assert sorted((await job_page.update())["ids"]) == ["job-timeline", "jobpart-4"]
    run(scenario)


def test_the_engines_new_log_lines_reach_the_open_job_page_and_no_console_panel(
        farm: Farm, staff_user: AbstractBaseUser) -> None:
    said = Line(SNAP_ID, timezone.now(), "WARNING", "P5 of snap-update failed: synthesis failed", "gpu-host-a", 5)

    async def scenario() -> None:
        async with job_page_stream(staff_user, SNAP_ID) as job_page, connected(staff_user) as console:
            first = await job_page.update()
            assert 'id="job-log"' in first["html"] and "No log lines yet." in first["html"]
            await console.update()
            await db(job_log.append)([said])  # the ledger's hint names the job's page alone
            update = await job_page.update()
            assert update["ids"] == ["job-log"]
            assert 'data-level="WARNING"' in update["html"] and '<span class="part">P5</span>' in update["html"]
            assert "P5 of snap-update failed: synthesis failed" in update["html"]
            assert await console.silent_for(0.5), "a log line moved a console panel"
    run(scenario)
