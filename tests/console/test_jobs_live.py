"""/jobs/ is live: its stream (/events/?jobs=<its query>) sends the table of exactly that view,
then swaps a job's row when it moves, and the whole table when a job arrives or leaves it."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from engine.ledger.jobs import cancel_job, submit_job
from engine.models import ProofJob
from engine.states import PartitionState
from tests.console.conftest import SNAP_ID, Farm, bump_version, move
from tests.console.test_stream import Stream, connected, db, hint, run

pytestmark = pytest.mark.django_db(transaction=True)


def jobs_page_stream(user: Any, query: str) -> AbstractAsyncContextManager[Stream]:
    """The stream a jobs page opens: /events/?jobs=<its query>."""
    return connected(user, query=urlencode({"jobs": query}).encode())


def rows(html: str) -> list[str]:
    import re

    return re.findall(r'<div id="job-row-\d+"[^>]* data-job="([^"]+)"', html)


def submitted(job_id: str, kind: str = "winning-post") -> int:
    submit_job(kind=kind, job_id=job_id, inputs={}, num_partitions=1)
    return bump_version()


def cancelled(job_id: str) -> int:
    cancel_job(ProofJob.objects.get(job_id=job_id))
    return int(ProofJob.objects.get(job_id=job_id).version)


def test_a_jobs_page_stream_opens_with_its_table_only(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with jobs_page_stream(staff_user, "sort=-submitted") as stream:
            first = await stream.update()
            assert stream.status == 200
            assert first["ids"] == ["frag-jobs"]
            assert rows(first["html"]) == [SNAP_ID]
    run(scenario)


def test_a_new_job_appears_and_a_state_change_swaps_only_its_row(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with jobs_page_stream(staff_user, "sort=-submitted") as stream:
            await stream.update()
            version = await db(submitted)("fresh-1")
            await hint(version, job="fresh-1")
            update = await stream.update()
            assert update["ids"] == ["frag-jobs"]  # a new row: the table's shape changed
            assert rows(update["html"]) == ["fresh-1", SNAP_ID]
            assert 'data-matching="2"' in update["html"]
            version = await db(cancelled)("fresh-1")
            await hint(version, job="fresh-1")
            update = await stream.update()
            (row_id,) = update["ids"]
            assert row_id.startswith("job-row-") and 'data-job="fresh-1"' in update["html"]
            assert 'data-state="cancelled"' in update["html"] and 'formaction="/jobs/fresh-1/retry"' in update["html"]
    run(scenario)


def test_progress_shows_in_the_row_as_partitions_finish(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with jobs_page_stream(staff_user, "sort=-submitted") as stream:
            first = await stream.update()
            assert "1/16" in first["html"]
            version = await db(move)(SNAP_ID, 1, PartitionState.DONE, finished_at=timezone.now(), worker=None)
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=1)
            update = await stream.update()
            assert len(update["ids"]) == 1 and 'data-done="2"' in update["html"] and "2/16" in update["html"]
    run(scenario)


def test_the_live_table_keeps_the_page_s_filter_search_and_sort(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with jobs_page_stream(staff_user, "state=queued&q=KEEP&sort=job") as stream:
            first = await stream.update()
            assert rows(first["html"]) == []
            for job_id in ("keep-b", "other-c", "keep-a"):
                await hint(await db(submitted)(job_id), job=job_id)
            update = await stream.update()
            while rows(update["html"]) != ["keep-a", "keep-b"]:  # the hints may come in more than one pass
                update = await stream.update()
            assert "other-c" not in update["html"]
            version = await db(cancelled)("keep-a")  # leaves the queued view
            await hint(version, job="keep-a")
            update = await stream.update()
            assert update["ids"] == ["frag-jobs"] and rows(update["html"]) == ["keep-b"]
    run(scenario)


def test_equal_views_share_one_fragment_whatever_order_their_parameters_came_in(
        farm: Farm, staff_user: AbstractBaseUser) -> None:
    from engine.console.consumers import HUB

    async def scenario() -> None:
        async with jobs_page_stream(staff_user, "sort=job&kind=snap-update&bogus=1") as one, \
                jobs_page_stream(staff_user, "kind=snap-update&sort=job") as two:
            await one.update()
            await two.update()
            assert HUB.watched() == {"jobs:kind=snap-update&sort=job"}
    run(scenario)
