"""/events/: a snapshot on connect, then only the fragments a committed change touched."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import ApplicationCommunicator
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from engine.console import fragments, reads
from engine.console import render as rendering
from engine.console.consumers import GROUP, HUB, EventStreamConsumer
from engine.states import PartitionState
from engine.status.host_report import KeyReport
from engine.status.records import current_version
from tests.console.conftest import SNAP_ID, Farm, move

pytestmark = pytest.mark.django_db(transaction=True)

Frame = dict[str, Any]


class Fast(EventStreamConsumer):
    """The real consumer with test-sized intervals."""

    ping_seconds = 0.3
    flush_seconds = 0.2
    refresh_seconds = 60.0


def parse(raw: str) -> Frame:
    frame: Frame = {"retry": None, "id": None, "data": [], "comment": []}
    for line in raw.split("\n"):
        if line.startswith(":"):
            frame["comment"].append(line[1:].strip())
        elif line.startswith("data: "):
            frame["data"].append(line[6:])
        elif line.startswith("id: "):
            frame["id"] = line[4:]
        elif line.startswith("retry: "):
            frame["retry"] = int(line[7:])
    html = "\n".join(frame["data"])
    frame["html"] = html
    frame["ids"] = [i for i in re.findall(r'<\w+ id="([\w-]+)" [^>]*hx-swap-oob="true"', html) if i != "server-clock"]
    return frame


class Stream:
    def __init__(self, communicator: ApplicationCommunicator) -> None:
        self.communicator = communicator
        self.buffer = ""
        self.status: int | None = None

    async def frame(self, timeout: float = 10.0) -> Frame:
        while "\n\n" not in self.buffer:
            message = await self.communicator.receive_output(timeout)
            if message["type"] == "http.response.start":
                self.status = message["status"]
                continue
            self.buffer += message["body"].decode()
        raw, self.buffer = self.buffer.split("\n\n", 1)
        return parse(raw)

    async def update(self, timeout: float = 10.0) -> Frame:
        """The next frame that carries fragments (pings skipped)."""
        while True:
            frame = await self.frame(timeout)
            if frame["data"]:
                return frame

    async def silent_for(self, seconds: float) -> bool:
        """No fragment arrives for this long (pings may). Polls with receive_nothing, which,
        unlike a timed-out receive_output, leaves the consumer running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline:
            if "\n\n" in self.buffer or not await self.communicator.receive_nothing(timeout=0.05, interval=0.01):
                if (await self.frame())["data"]:
                    return False
        return True


def scope(user: Any) -> dict[str, Any]:
    return {"type": "http", "http_version": "1.1", "method": "GET", "path": "/events/",
            "query_string": b"", "headers": [], "user": user}


@asynccontextmanager
async def connected(user: Any, consumer: type[EventStreamConsumer] = Fast, query: bytes = b"") -> AsyncIterator[Stream]:
    communicator = ApplicationCommunicator(consumer.as_asgi(), {**scope(user), "query_string": query})
    await communicator.send_input({"type": "http.request", "body": b""})
    stream = Stream(communicator)
    try:
        yield stream
    finally:
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=2)


async def hint(version: int, **where: Any) -> None:
    await get_channel_layer().group_send(GROUP, {"type": "status.changed", "host": where.get("host"),
                                                 "job": where.get("job"), "partition": where.get("partition"),
                                                 "version": version})


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def fresh_layer() -> None:
        await get_channel_layer().flush()
        await scenario()
    async_to_sync(fresh_layer)()


db = database_sync_to_async


@pytest.fixture
def steady_task_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task stream's lanes are resent at every step of the clock too; a test that counts
    units must not straddle a step."""
    monkeypatch.setattr(reads, "TASK_STREAM_STEP_S", 10**9)


def test_the_stream_opens_with_every_fragment_retry_and_the_version(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            first = await stream.update()
            assert stream.status == 200
            assert sorted(first["ids"]) == sorted(f.dom_id for f in fragments.REGISTRY.values())
            assert first["retry"] == Fast.retry_ms
            assert first["id"] == str(await db(current_version)())
            assert 'id="server-clock"' in first["html"]
    run(scenario)


def test_anonymous_clients_get_403(farm: Farm) -> None:
    async def scenario() -> None:
        communicator = ApplicationCommunicator(AuthMiddlewareStack(Fast.as_asgi()),
                                               {**scope(None), "user": None} | {"user": AnonymousUser()})
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(2)
        assert start["status"] == 403
        await communicator.wait(timeout=2)
    run(scenario)


def test_a_session_cookie_of_an_operator_opens_the_stream(farm: Farm, operator_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(operator_user) as stream:
            await stream.update()
            assert stream.status == 200
    run(scenario)


def test_a_partition_reaching_the_gpu_sends_exactly_the_units_it_changed(
        farm: Farm, staff_user: AbstractBaseUser, steady_task_stream: None) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()
            version = await db(move)(SNAP_ID, 2, PartitionState.GPU, worker=farm.w0, gpu_started_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=2)
            update = await stream.update()
            # Its cell, the card of the worker now proving it, and that worker's task lane.
            assert sorted(update["ids"]) == sorted([f"cell-{farm.snap.pk}-2", f"lane-{farm.w0.pk}",
                                                    f"worker-{farm.w0.pk}"])
            assert update["id"] == str(version)
            assert f'data-worker="gpu-host-a/cuda:0/W0" data-state="proving" data-partition="{SNAP_ID}#2"' in update["html"]
            assert f'data-partition="{SNAP_ID}#2" data-state="gpu" data-version="{version}"' in update["html"]
            assert 'id="frag-pipelines"' not in update["html"]
    run(scenario)


def test_a_snapshot_nests_units_without_their_own_swap(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            first = await stream.update()
            # Only the panels swap; a nested cell or card swapping too would be torn out of them.
            assert first["html"].count('hx-swap-oob="true"') == len(fragments.REGISTRY) + 1
            assert f'<div id="cell-{farm.snap.pk}-15" class="cell pending"' in first["html"]
            assert f'<div id="worker-{farm.w1.pk}" class="card proving"' in first["html"]
    run(scenario)


def test_the_hint_is_only_a_pointer_the_content_is_read_from_the_records(
        farm: Farm, staff_user: AbstractBaseUser, steady_task_stream: None) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()
            # A hint for a change that never committed re-reads the records and finds nothing new.
            await hint(1, host="gpu-host-a", job=SNAP_ID)
            assert await stream.silent_for(0.6)
    run(scenario)


CELL_STATE = re.compile(r'id="(cell-[\d-]+)"[^>]*data-state="(\w+)"')


def test_a_burst_of_transitions_is_coalesced_into_few_flushes(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            cells = dict(CELL_STATE.findall((await stream.update())["html"]))
            loop = asyncio.get_running_loop()
            started = loop.time()
            last = 0
            for index in range(4, 16):
                last = await db(move)(SNAP_ID, index, PartitionState.SYNTHESIZING, synth_started_at=timezone.now())
                await hint(last, host="gpu-host-a", job=SNAP_ID, partition=index)
            frames = []
            while True:
                frame = await stream.update()
                frames.append(frame)
                cells.update(CELL_STATE.findall(frame["html"]))
                if frame["id"] == str(last):
                    break
            elapsed = loop.time() - started
            # Twelve transitions, at most one flush per flush interval (plus the one in flight).
            assert len(frames) <= elapsed / Fast.flush_seconds + 2
            assert len(frames) < 12
            # What the browser holds after applying the frames: P3 and the twelve.
            assert list(cells.values()).count("synthesizing") == 13
            assert all('id="frag-pipelines"' not in f["html"] for f in frames)
    run(scenario)


def test_a_ping_comment_keeps_the_connection_alive(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()
            frame = await stream.frame(timeout=Fast.ping_seconds * 4)
            assert frame["comment"] == ["ping"] and not frame["data"]
    run(scenario)


def test_disconnecting_leaves_the_group_and_stops_the_tasks(farm: Farm, staff_user: AbstractBaseUser) -> None:
    consumers: list[EventStreamConsumer] = []

    class Watched(Fast):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            consumers.append(self)

    async def scenario() -> None:
        layer = get_channel_layer()
        async with connected(staff_user, Watched) as stream:
            await stream.update()
            consumer = consumers[0]
            hub_channel, hub_task, hub_flusher = HUB.channel, HUB.task, HUB.flusher
            assert consumer in HUB.streams and hub_channel in layer.groups.get(GROUP, {})
            tasks = list(consumer.tasks)
            assert tasks and not any(t.done() for t in tasks)
        # The last stream gone, the process leaves the group and stops listening.
        assert consumer not in HUB.streams and hub_channel not in layer.groups.get(GROUP, {})
        assert all(t.done() for t in tasks) and consumer.tasks == [] and hub_task is not None and hub_task.done()
        assert hub_flusher is not None and hub_flusher.done() and HUB.flusher is None
    run(scenario)


def test_one_hint_reaches_every_open_stream(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as first, connected(staff_user) as second:
            await first.update()
            await second.update()
            version = await db(move)(SNAP_ID, 2, PartitionState.GPU, worker=farm.w0, gpu_started_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=2)
            assert (await first.update())["id"] == (await second.update())["id"] == str(version)
    run(scenario)


def test_a_host_change_refreshes_only_host_fragments(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()

            def load_a_key() -> int:  # what the engine writes when its key cache loads one
                from tests.console.conftest import bump_version
                version = bump_version()
                farm.host.key_cache = [*farm.host.key_cache, KeyReport("window-post/tiny", 20 * 2**30).to_json()]
                farm.host.save(update_fields=["key_cache"])
                return version
            version = await db(load_a_key)()
            await hint(version, host="gpu-host-a")
            update = await stream.update()
            # the synthesis panel's reason names the memory held by the host's reserving claim
            assert sorted(update["ids"]) == ["frag-keys", "frag-memory", "frag-synthesis"]
            assert "gauge split red" in update["html"]
    run(scenario)


def test_consoles_in_step_share_one_frame(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as first, connected(staff_user) as second:
            await first.update()
            await second.update()
            built = HUB.frames_built
            version = await db(move)(SNAP_ID, 3, PartitionState.SYNTH_DONE, synth_finished_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=3)
            a, b = await first.update(), await second.update()
            assert a["html"] == b["html"] and a["id"] == str(version)
            assert HUB.frames_built == built + 1
    run(scenario)


def test_a_job_leaving_the_panel_resends_the_panel(farm: Farm, staff_user: AbstractBaseUser) -> None:
    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()

            def finish_job() -> int:
                from engine.models import ProofJob
                from tests.console.conftest import bump_version
                version = bump_version()
                ProofJob.objects.filter(pk=farm.snap.pk).update(state="done", version=version)
                return version
            version = await db(finish_job)()
            await hint(version, host="gpu-host-a", job=SNAP_ID)
            update = await stream.update()
            assert "frag-pipelines" in update["ids"]
            assert "Nothing in flight." in update["html"] and f"cell-{farm.snap.pk}-0" not in update["html"]
    run(scenario)


def test_a_lost_hint_is_repaired_by_the_periodic_full_pass(
        farm: Farm, staff_user: AbstractBaseUser, steady_task_stream: None) -> None:
    class Refreshing(Fast):
        refresh_seconds = 0.5

    async def scenario() -> None:
        async with connected(staff_user, Refreshing) as stream:
            await stream.update()
            # Committed, but its hint never arrives (Redis may drop them).
            version = await db(move)(SNAP_ID, 5, PartitionState.SYNTHESIZING, synth_started_at=timezone.now())
            update = await stream.update(timeout=5)
            assert f'data-partition="{SNAP_ID}#5" data-state="synthesizing" data-version="{version}"' in update["html"]
            assert update["id"] == str(version)
    run(scenario)


def test_a_failed_read_is_retried_and_the_stream_carries_on(
        farm: Farm, staff_user: AbstractBaseUser, monkeypatch: pytest.MonkeyPatch) -> None:
    real_render = rendering.render
    failures: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> rendering.Rendered:
        if not failures:
            failures.append(1)
            raise RuntimeError("database is locked")
        return real_render(*args, **kwargs)

    async def scenario() -> None:
        async with connected(staff_user) as stream:
            await stream.update()
            monkeypatch.setattr(rendering, "render", flaky)
            version = await db(move)(SNAP_ID, 6, PartitionState.SYNTHESIZING, synth_started_at=timezone.now())
            await hint(version, host="gpu-host-a", job=SNAP_ID, partition=6)
            update = await stream.update()
            assert failures and update["id"] == str(version)
            assert f'data-partition="{SNAP_ID}#6" data-state="synthesizing"' in update["html"]
    run(scenario)


class Restartable:
    """The real in-memory layer, made to behave as a restarted Redis does: every group is
    forgotten, and (optionally) the receive in progress fails with a connection error."""

    def __init__(self, layer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.layer = layer
        self.broken: asyncio.Event | None = None
        real_receive = layer.receive

        async def receive(channel: str) -> Any:
            if self.broken is None:
                self.broken = asyncio.Event()
            got = asyncio.ensure_future(real_receive(channel))
            fail = asyncio.ensure_future(self.broken.wait())
            done, _ = await asyncio.wait({got, fail}, return_when=asyncio.FIRST_COMPLETED)
            if got in done:
                fail.cancel()
                return got.result()
            got.cancel()
            self.broken.clear()
            raise ConnectionError("Connection closed by server.")

        monkeypatch.setattr(layer, "receive", receive)

    def restart(self, *, failing: bool) -> None:
        self.layer.groups.clear()
        if failing and self.broken is not None:
            self.broken.set()


async def heard(stream: Stream, version: int, partition: int, seconds: float = 5.0) -> Frame | None:
    """Keep hinting, as a busy farm does, until the stream carries an update (None if never)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await hint(version, host="gpu-host-a", job=SNAP_ID, partition=partition)
        if "\n\n" in stream.buffer or not await stream.communicator.receive_nothing(timeout=0.1, interval=0.01):
            frame = await stream.frame()
            if frame["data"]:
                return frame
    return None


@pytest.mark.parametrize("failing", [True, False], ids=["receive-fails", "groups-forgotten"])
def test_an_open_stream_hears_hints_again_after_the_channel_layer_restarts(
        farm: Farm, staff_user: AbstractBaseUser, steady_task_stream: None,
        monkeypatch: pytest.MonkeyPatch, failing: bool) -> None:
    monkeypatch.setattr(HUB, "rejoin_seconds", 0.3)

    async def scenario() -> None:
        redis = Restartable(get_channel_layer(), monkeypatch)
        async with connected(staff_user) as stream:
            await stream.update()
            redis.restart(failing=failing)
            version = await db(move)(SNAP_ID, 7, PartitionState.SYNTHESIZING, synth_started_at=timezone.now())
            update = await heard(stream, version, 7)
            assert update is not None, "the open stream never heard a hint after the restart"
            assert f'data-partition="{SNAP_ID}#7" data-state="synthesizing" data-version="{version}"' in update["html"]
    run(scenario)
