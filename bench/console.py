"""Console stream bench: transition-to-client latency, bytes/s and server CPU per SSE connection.

    .venv/bin/python bench/console.py                 # 1, 10 and 50 connections
    .venv/bin/python bench/console.py --connections 50 --transitions 400 --rate 80
    .venv/bin/python bench/console.py --connections 50 --busy 2   # on a loaded machine

For each connection count it starts a server process (Daphne with provingsite.asgi, SQLite
and the in-memory channel layer in a fresh data directory, exactly the embedded default),
opens that many plain asyncio HTTP readers on /events/ with a staff session, and then has
the server apply a burst of partition transitions the way the engine's writer does (bump the
farm version and update the partition in one transaction, then hand the hint to Daphne's
loop with run_coroutine_threadsafe). Latency is, per connection and transition, the time from
the commit to the first frame whose event id is at least that version; the stream promises
with an id that everything up to it is on screen. Server CPU is the server process's
user+system time during the burst, from /proc; "hub" is the console's own account of its
passes (wall time reading and building, and handing frames to Daphne).

The readers share the machine with the server, so their cost is reported too
(client_cpu_pct, of one core): they decode each chunk and look only for the id line, which
stays a few per cent of a core at fifty connections. --busy N adds N busy-loop processes for
the length of each run, so a before/after comparison on a shared 2-core machine can be made
under a known load rather than whatever the neighbours happen to do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STATES = ["synthesizing", "synth_done", "gpu", "finalizing", "done"]


# ---- the server side ---------------------------------------------------------------------


def serve(port: int, data_dir: Path, transitions: int, rate: float) -> None:
    os.environ["PROVINGSITE_DATA_DIR"] = str(data_dir)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    user = get_user_model().objects.create_user("bench", password="bench-only-pw", is_staff=True)
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()

    from daphne.server import Server

    from provingsite.asgi import application

    loop_box: dict[str, asyncio.AbstractEventLoop] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        loop_box.setdefault("loop", asyncio.get_running_loop())
        await application(scope, receive, send)

    threading.Thread(target=_burst, args=(data_dir, loop_box, transitions, rate), daemon=True).start()
    print(json.dumps({"session": session.session_key, "pid": os.getpid()}), flush=True)
    Server(app, endpoints=[f"tcp:port={port}:interface=127.0.0.1"], verbosity=0).run()


def _farm() -> list[tuple[str, int]]:
    from datetime import timedelta

    from django.utils import timezone

    from engine.models import EngineHost, Partition, ProofJob, StatusClock, Worker

    now = timezone.now()
    host = EngineHost.objects.create(name="bench-host", backend="cuda", started_at=now, heartbeat_at=now,
                                     memory_budget_bytes=64 * 2**30, synthesis_max=4)
    for device in ("cuda:0", "cuda:1"):
        for ordinal in (0, 1):
            Worker.objects.create(host=host, device=device, ordinal=ordinal)
    StatusClock.objects.get_or_create(pk=1)
    parts = []
    for n, kind in enumerate(["snap-update", "porep-c2", "snap-update", "window-post"]):
        count = {"snap-update": 16, "porep-c2": 10, "window-post": 4}[kind]
        job = ProofJob.objects.create(job_id=f"bench-{kind}-{n:04d}", kind=kind, state="running", host=host,
                                      num_partitions=count, started_at=now - timedelta(seconds=1))
        for index in range(count):
            Partition.objects.create(job=job, index=index, host=host, state="reserving")  # claimed
            parts.append((job.job_id, index))
    return parts


def _burst(data_dir: Path, loop_box: dict[str, asyncio.AbstractEventLoop], transitions: int, rate: float) -> None:
    from channels.layers import get_channel_layer
    from django.db import transaction
    from django.db.models import F
    from django.utils import timezone

    from engine.console.consumers import GROUP, HUB
    from engine.models import Partition, StatusClock, Worker

    parts = _farm()
    workers = list(Worker.objects.all())
    go = data_dir / "go"
    while not go.exists():
        time.sleep(0.02)
    HUB.clear()  # count the burst's passes, not the snapshots of the connections opening
    layer = get_channel_layer()
    commits: dict[int, float] = {}
    step = {p: 0 for p in parts}
    interval = 1.0 / rate
    start = time.monotonic()
    on_gpu: dict[int, tuple[str, int]] = {}  # worker pk → the one partition it proves (a database invariant)
    cursor = 0
    for n in range(transitions):
        # Round robin over the partitions, passing over one that would enter gpu while every
        # worker is busy: it waits in synth_done, as it would for the engine.
        while True:
            job_id, index = parts[cursor % len(parts)]
            cursor += 1
            stage = step[(job_id, index)] % len(STATES)  # start over so the burst runs as long as asked
            if STATES[stage] != "gpu" or len(on_gpu) < len(workers):
                break
        state = STATES[stage]
        step[(job_id, index)] = stage + 1
        now = timezone.now()
        fields: dict[str, Any] = {"state": state}
        if state == "synthesizing":
            fields.update(synth_started_at=now, synth_finished_at=None, gpu_started_at=None, gpu_finished_at=None)
        elif state == "synth_done":
            fields["synth_finished_at"] = now
        elif state == "gpu":
            worker = next(w for w in workers if w.pk not in on_gpu)
            on_gpu[worker.pk] = (job_id, index)
            fields.update(gpu_started_at=now, worker=worker)
        elif state == "finalizing":
            fields["gpu_finished_at"] = now
            on_gpu = {pk: p for pk, p in on_gpu.items() if p != (job_id, index)}
        else:
            fields["finished_at"] = now
        with transaction.atomic():
            StatusClock.objects.filter(pk=1).update(value=F("value") + 1)
            version = StatusClock.objects.get(pk=1).value
            Partition.objects.filter(job__job_id=job_id, index=index).update(version=version, **fields)
        commits[version] = time.time()
        message = {"type": "status.changed", "host": "bench-host", "job": job_id, "partition": index,
                   "version": version}
        asyncio.run_coroutine_threadsafe(layer.group_send(GROUP, message), loop_box["loop"])
        pause = start + (n + 1) * interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    time.sleep(1.0)
    (data_dir / "renders.json").write_text(json.dumps({
        "passes": HUB.renders, "render_s": round(HUB.render_seconds, 3), "fan_out_s": round(HUB.fan_out_seconds, 3),
        "frames_built": HUB.frames_built, "frames_sent": HUB.frames_sent}))
    (data_dir / "commits.json").write_text(json.dumps(commits))


# ---- the client side ---------------------------------------------------------------------


class Reader:
    """One SSE connection as a plain HTTP/1.1 reader (chunked transfer decoding by hand)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []  # (event id, arrival wall time)
        self.bytes = 0
        self.frames = 0
        self.ready = asyncio.Event()

    async def run(self, port: int, session: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write((f"GET /events/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
                      f"Cookie: sessionid={session}\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head
        chunked = b"chunked" in head.lower()
        pending = ""
        try:
            while True:  # until the task is cancelled at the end of the run
                if chunked:
                    size = int((await reader.readline()).strip() or b"0", 16)
                    body = (await reader.readexactly(size + 2))[:-2]
                else:
                    body = await reader.read(65536)
                self.bytes += len(body)
                arrived = time.time()
                pending += body.decode()
                while "\n\n" in pending:
                    frame, pending = pending.split("\n\n", 1)
                    match = re.search(r"^id: (\d+)$", frame, re.M)
                    if match:
                        self.seen.append((int(match.group(1)), arrived))
                        self.frames += 1
                        self.ready.set()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latencies(readers: list[Reader], commits: dict[int, float]) -> list[float]:
    out: list[float] = []
    for reader in readers:
        frames = sorted(reader.seen)
        for version, committed in commits.items():
            arrivals = [t for v, t in frames if v >= version]
            if arrivals:
                out.append((min(arrivals) - committed) * 1000)
    return out


BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


async def measure(connections: int, transitions: int, rate: float, busy: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port), "--data-dir", tmp,
                                   "--transitions", str(transitions), "--rate", str(rate)],
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert server.stdout is not None  # stdout=PIPE
            hello = json.loads(server.stdout.readline())
            await wait_port(port)
            readers = [Reader() for _ in range(connections)]
            tasks = [asyncio.create_task(r.run(port, hello["session"])) for r in readers]
            await asyncio.wait_for(asyncio.gather(*(r.ready.wait() for r in readers)), 60)
            await asyncio.sleep(0.5)
            before_bytes = sum(r.bytes for r in readers)
            cpu_before, wall_before = cpu_seconds(server.pid), time.monotonic()
            client_before = time.process_time()
            # Neighbours that want whole cores, as other work on a shared machine does.
            neighbours = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(seconds=30 + 3 * transitions / rate)])
                          for _ in range(busy)]
            (data_dir / "go").touch()
            deadline = time.monotonic() + 10 + 3 * transitions / rate
            while not (data_dir / "commits.json").exists():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the burst did not finish")
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # let the last flush arrive
            cpu_after, wall_after = cpu_seconds(server.pid), time.monotonic()
            client_cpu = time.process_time() - client_before
            for neighbour in neighbours:
                neighbour.kill()
                neighbour.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            commits = {int(k): v for k, v in json.loads((data_dir / "commits.json").read_text()).items()}
            renders = json.loads((data_dir / "renders.json").read_text())
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    lat = sorted(latencies(readers, commits))
    wall = wall_after - wall_before
    cpu = cpu_after - cpu_before
    missed = connections * len(commits) - len(lat)
    return {
        "connections": connections, "transitions": len(commits), "wall_s": round(wall, 2),
        "p50_ms": round(statistics.median(lat), 1) if lat else None,
        "p99_ms": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1) if lat else None,
        "max_ms": round(lat[-1], 1) if lat else None, "missed": missed,
        "bytes_per_s_per_conn": round((sum(r.bytes for r in readers) - before_bytes) / wall / max(connections, 1)),
        "frames_per_s_per_conn": round(sum(r.frames for r in readers) / wall / max(connections, 1), 1),
        "hub": renders, "client_cpu_pct": round(100 * client_cpu / wall, 1), "server_cpu_s": round(cpu, 2),
        "server_cpu_pct": round(100 * cpu / wall, 1), "busy_neighbours": busy,
    }


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_port(port: int) -> None:
    """Wait for the server, with one real request so Daphne's loop is known to the burst."""
    for _ in range(300):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            await reader.read()
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, nargs="*", default=[1, 10, 50],
                        help="connection counts; a run with none is added as the baseline (the burst alone)")
    parser.add_argument("--transitions", type=int, default=300)
    parser.add_argument("--rate", type=float, default=60.0, help="transitions per second in the burst")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy-loop processes beside the burst (2 reproduces a loaded 2-core machine)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    if args.serve:
        serve(args.port, args.data_dir, args.transitions, args.rate)
        return
    import django

    django.setup()
    from engine.console.consumers import EventStreamConsumer
    print(f"burst: {args.transitions} transitions at {args.rate:g}/s; one flusher per process, at most one frame "
          f"per {EventStreamConsumer.flush_seconds} s; {args.busy} busy neighbours")
    # The burst's own writes run in the server process; their cost is the baseline.
    baseline = asyncio.run(measure(0, args.transitions, args.rate, args.busy))
    print(json.dumps(baseline), flush=True)
    for n in args.connections:
        result = asyncio.run(measure(n, args.transitions, args.rate, args.busy))
        extra = result["server_cpu_s"] - baseline["server_cpu_s"]
        result["console_cpu_ms_per_s_per_conn"] = round(1000 * extra / result["wall_s"] / n, 2)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
