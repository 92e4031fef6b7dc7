"""API under load: 50 SSE streams plus 200 job polls/s, with load shedding on and off.

    .venv/bin/python bench/load.py                    # 60 s shedding on, 20 s reference: ~2 min
    .venv/bin/python bench/load.py --seconds 30 --rate 200 --streams 50 --tokens 10

Each run starts the real service in its own process (Daphne with provingsite.asgi, SQLite and
the in-memory channel layer in a fresh data directory: the embedded default), with a few
client tokens, their jobs, and a writer thread that moves partitions through their states the
way the engine's writer does (a fresh farm version per transition, then a hint on Daphne's
loop), so ETags go stale and the streams have frames to send. The load side opens the SSE
streams with a staff session (bench/console.py's reader), then sends job polls open-loop at
a fixed rate, round-robin over the tokens: mostly one job's detail, one in ten the job list,
each with the If-None-Match of the last answer for that URL, as a polling client does.
Open-loop means a slow server does not slow the offered load down: requests it cannot serve
pile up, which is what shedding is for.

Latency is from the moment a request was due to the end of its answer. "Admitted" is every
answer that is not a 429 or 503. The second run is the same server with
PROVINGSITE_LOAD_SHEDDING=0 (no admission queue, no per-token rate), for --reference-seconds
(20 s by default: long enough for its queue to show, short enough that the whole bench takes
about two minutes); the ratio column is off / on. The target (issue 15) is the first run's:
admitted p99 under 250 ms and every request answered within 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._table import markdown_table  # noqa: E402
from bench.console import Reader, cpu_seconds, free_port, wait_port  # noqa: E402

STATES = ["synthesizing", "synth_done", "gpu", "finalizing", "done"]
ANSWER_TIMEOUT_S = 10.0  # a request with no answer by then is counted as timed out (past 1 s is late anyway)


# ---- the server side ---------------------------------------------------------------------


def serve(port: int, data_dir: Path, tokens: int, write_rate: float) -> None:
    os.environ["PROVINGSITE_DATA_DIR"] = str(data_dir)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    session = _staff_session()
    raw_tokens, jobs = _clients(tokens)

    from provingsite.asgi import application
    from provingsite.server import BoundedServer

    loop_box: dict[str, asyncio.AbstractEventLoop] = {}
    inside: list[float] = []  # ms from the application's call to its return, per API request

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        loop_box.setdefault("loop", asyncio.get_running_loop())
        started = time.monotonic()
        await application(scope, receive, send)
        if str(scope.get("path", "")).startswith("/api/"):
            inside.append((time.monotonic() - started) * 1000)

    threading.Thread(target=_writer, args=(loop_box, write_rate), daemon=True).start()
    print(json.dumps({"session": session, "tokens": raw_tokens, "jobs": jobs, "pid": os.getpid()}), flush=True)
    # The server `python -m provingsite.server` runs: Daphne with the bounded request factory.
    BoundedServer(app, endpoints=[f"tcp:port={port}:interface=127.0.0.1"], verbosity=0).run()
    (data_dir / "inside.json").write_text(json.dumps(inside))


def _staff_session() -> str:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    user = get_user_model().objects.create_user("bench", password="bench-only-pw", is_staff=True)
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return str(session.session_key)


def _clients(count: int) -> tuple[list[str], list[list[str]]]:
    """``count`` client tokens, each with two running jobs on a bench host with four workers."""
    from django.utils import timezone

    from engine.ledger.tokens import issue_token
    from engine.models import EngineHost, Partition, ProofJob, StatusClock, Worker

    now = timezone.now()
    host = EngineHost.objects.create(name="bench-host", backend="cuda", started_at=now, heartbeat_at=now,
                                     memory_budget_bytes=64 * 2**30, synthesis_max=4)
    for device in ("cuda:0", "cuda:1"):
        for ordinal in (0, 1):
            Worker.objects.create(host=host, device=device, ordinal=ordinal)
    StatusClock.objects.get_or_create(pk=1)
    raw_tokens, jobs = [], []
    for n in range(count):
        record, raw = issue_token(f"bench-client-{n}")
        raw_tokens.append(raw)
        mine = []
        for k in range(2):
            job = ProofJob.objects.create(job_id=f"bench-{n}-{k}", kind="porep-c2", state="running", host=host,
                                          num_partitions=10, started_at=now, client=record)
            Partition.objects.bulk_create(Partition(job=job, index=i, host=host) for i in range(10))
            mine.append(job.job_id)
        jobs.append(mine)
    return raw_tokens, jobs


def _writer(loop_box: dict[str, asyncio.AbstractEventLoop], rate: float) -> None:
    """Partition transitions at ``rate`` per second, as the engine's writer commits them."""
    from channels.layers import get_channel_layer
    from django.db import transaction
    from django.utils import timezone

    from engine.console.consumers import GROUP
    from engine.ledger.clock import next_stamp
    from engine.models import Partition, Worker

    while "loop" not in loop_box:
        time.sleep(0.05)
    layer = get_channel_layer()
    parts = list(Partition.objects.values_list("pk", "job__job_id", "index"))
    workers = list(Worker.objects.all())
    step = dict.fromkeys((pk for pk, _, _ in parts), 0)
    start, n = time.monotonic(), 0
    while True:
        pk, job_id, index = parts[n % len(parts)]
        state = STATES[step[pk] % len(STATES)]
        step[pk] += 1
        fields: dict[str, Any] = {"state": state}
        if state == "gpu":
            fields["worker"] = workers[n % len(workers)]
        elif state == "done":
            fields["finished_at"] = timezone.now()
        with transaction.atomic():
            version = next_stamp().version
            Partition.objects.filter(pk=pk).update(version=version, **fields)
        message = {"type": "status.changed", "host": "bench-host", "job": job_id, "partition": index,
                   "version": version}
        asyncio.run_coroutine_threadsafe(layer.group_send(GROUP, message), loop_box["loop"])
        n += 1
        pause = start + n / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)


# ---- the load side -----------------------------------------------------------------------


@dataclass
class Tally:
    latencies: dict[int, list[float]] = field(default_factory=dict)  # status → ms
    timed_out: int = 0
    failed: int = 0  # connection refused or reset

    def add(self, status: int, ms: float) -> None:
        self.latencies.setdefault(status, []).append(ms)


class Connection:
    """One keep-alive HTTP/1.1 connection; a request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def get(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1"] + [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name:
                fields[name.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(fields.get("content-length", "0")))
        return status, fields, body

    def close(self) -> None:
        self.writer.close()


class Poller:
    """Open-loop job polls at a fixed rate over a pool of keep-alive connections."""

    def __init__(self, port: int, tokens: list[str], jobs: list[list[str]]) -> None:
        self.port, self.tokens, self.jobs = port, tokens, jobs
        self.idle: list[Connection] = []
        self.etags: dict[tuple[int, str], str] = {}
        self.tally = Tally()
        self.retry_after: Counter[str] = Counter()
        self.send_lag: list[float] = []  # ms from due to sent: this side's own delay

    def _target(self, n: int) -> tuple[int, str]:
        who = n % len(self.tokens)
        if n % 10 == 9:
            return who, "/api/v1/jobs?limit=20"
        mine = self.jobs[who]
        return who, f"/api/v1/jobs/{mine[(n // len(self.tokens)) % len(mine)]}"

    async def one(self, n: int, due: float) -> None:
        who, path = self._target(n)
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        if (who, path) in self.etags:
            headers["If-None-Match"] = self.etags[(who, path)]
        conn = self.idle.pop() if self.idle else None
        self.send_lag.append((time.monotonic() - due) * 1000)
        try:
            if conn is None:
                conn = await asyncio.wait_for(Connection.open(self.port), ANSWER_TIMEOUT_S)
            status, fields, _ = await asyncio.wait_for(conn.get(path, headers), ANSWER_TIMEOUT_S)
        except TimeoutError:
            self.tally.timed_out += 1
            if conn is not None:
                conn.close()
            return
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            self.tally.failed += 1
            if conn is not None:
                conn.close()
            return
        self.tally.add(status, (time.monotonic() - due) * 1000)
        if "etag" in fields:
            self.etags[(who, path)] = fields["etag"]
        if "retry-after" in fields:
            self.retry_after[fields["retry-after"]] += 1
        if fields.get("connection", "").lower() == "close":
            conn.close()
        else:
            self.idle.append(conn)

    async def run(self, rate: float, seconds: float) -> None:
        tasks = []
        start = time.monotonic()
        for n in range(int(rate * seconds)):
            due = start + n / rate
            pause = due - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            tasks.append(asyncio.create_task(self.one(n, due)))
        await asyncio.gather(*tasks)
        for conn in self.idle:
            conn.close()


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def measure(shedding: bool, seconds: float, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
        port = free_port()
        env = {**os.environ, "PROVINGSITE_LOAD_SHEDDING": "1" if shedding else "0"}
        log = open(Path(tmp) / "server.log", "w")  # noqa: SIM115 - closed with the run below
        server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port), "--data-dir", tmp,
                                   "--tokens", str(args.tokens), "--write-rate", str(args.write_rate)],
                                  stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, env=env)
        try:
            assert server.stdout is not None  # stdout=PIPE
            hello = json.loads(server.stdout.readline())
            await wait_port(port)
            readers = [Reader() for _ in range(args.streams)]
            streams = [asyncio.create_task(r.run(port, hello["session"])) for r in readers]
            await asyncio.wait_for(asyncio.gather(*(r.ready.wait() for r in readers)), 60)
            rss_before = rss_mib(server.pid)
            cpu_before, wall_before = cpu_seconds(server.pid), time.monotonic()
            poller = Poller(port, hello["tokens"], hello["jobs"])
            await poller.run(args.rate, seconds)
            wall = time.monotonic() - wall_before
            cpu = cpu_seconds(server.pid) - cpu_before
            rss_peak = peak_rss_mib(server.pid)
            frames = sum(r.frames for r in readers)
            for task in streams:
                task.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()
        inside_path = Path(tmp) / "inside.json"
        inside = json.loads(inside_path.read_text()) if inside_path.exists() else []
        # Daphne kills an application still running long after its client went away.
        killed = (Path(tmp) / "server.log").read_text().count("took too long to shut down")
    result = summarise(poller, shedding, seconds, wall, cpu, rss_before, rss_peak, frames, args)
    result["server_p99_ms"] = round(percentile(inside, 99), 1)
    result["load_average"] = round(os.getloadavg()[0], 1)
    result["abandoned_requests_killed"] = killed
    return result


def summarise(poller: Poller, shedding: bool, seconds: float, wall: float, cpu: float, rss_before: float, rss_peak: float,
              frames: int, args: argparse.Namespace) -> dict[str, Any]:
    lat = poller.tally.latencies
    admitted = [ms for status, values in lat.items() if status not in (429, 503) for ms in values]
    everything = [ms for values in lat.values() for ms in values]
    sent = int(args.rate * seconds)
    late = sum(ms > 1000 for ms in everything) + poller.tally.timed_out + poller.tally.failed
    return {
        "shedding": shedding, "sent": sent, "wall_s": round(wall, 1),
        "admitted_pct": round(100 * len(admitted) / sent, 2),
        "counts": {str(k): len(v) for k, v in sorted(lat.items())},
        "timed_out": poller.tally.timed_out, "failed": poller.tally.failed,
        "admitted_p50_ms": round(percentile(admitted, 50), 1), "admitted_p99_ms": round(percentile(admitted, 99), 1),
        "max_ms": round(max(everything, default=float("nan")), 1),
        "answered_within_1s_pct": round(100 * (sent - late) / sent, 2),
        "server_cpu_pct": round(100 * cpu / wall, 1), "rss_mib": [round(rss_before), round(rss_peak)],
        "sse_frames": frames, "client_send_lag_p99_ms": round(percentile(poller.send_lag, 99), 1),
    }


def report(on: dict[str, Any], off: dict[str, Any]) -> str:
    def count(r: dict[str, Any], status: str) -> int:
        return int(r["counts"].get(status, 0))

    def ratio(a: float, b: float) -> str:
        return f"{b / a:.2f}×" if a else "—"

    rows = [("admitted p50 ms", on["admitted_p50_ms"], off["admitted_p50_ms"]),
            ("admitted p99 ms", on["admitted_p99_ms"], off["admitted_p99_ms"]),
            ("max latency ms", on["max_ms"], off["max_ms"])]
    table = [(label, a, b, ratio(a, b)) for label, a, b in rows]
    table.append(("admitted (not 429/503)", f"{on['admitted_pct']} %", f"{off['admitted_pct']} %", "—"))
    for status in ("200", "304", "429", "503"):
        table.append((f"{status}s", count(on, status), count(off, status), "—"))
    table += [("timed out / failed", f"{on['timed_out']} / {on['failed']}", f"{off['timed_out']} / {off['failed']}",
               "—"),
              ("answered within 1 s", f"{on['answered_within_1s_pct']} %", f"{off['answered_within_1s_pct']} %", "—"),
              ("server CPU", f"{on['server_cpu_pct']} %", f"{off['server_cpu_pct']} %", "—"),
              ("server RSS start → peak MiB", "{} → {}".format(*on["rss_mib"]), "{} → {}".format(*off["rss_mib"]),
               "—"),
              ("SSE frames received", on["sse_frames"], off["sse_frames"], "—"),
              ("in-server p99 ms (app call → return)", on["server_p99_ms"], off["server_p99_ms"], "—"),
              ("load side's own send lag p99 ms", on["client_send_lag_p99_ms"], off["client_send_lag_p99_ms"], "—"),
              ("requests Daphne killed after the client left", on["abandoned_requests_killed"],
               off["abandoned_requests_killed"], "—"),
              ("machine load average (1 min)", on["load_average"], off["load_average"], "—")]
    return markdown_table(["", "shedding on", "shedding off", "off / on"], table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the run with shedding on")
    parser.add_argument("--reference-seconds", type=float, default=20.0,
                        help="length of the reference run with shedding off")
    parser.add_argument("--rate", type=float, default=200.0, help="job polls per second, offered open-loop")
    parser.add_argument("--streams", type=int, default=50, help="SSE connections held open")
    parser.add_argument("--tokens", type=int, default=10, help="client tokens the polls are spread over")
    parser.add_argument("--write-rate", type=float, default=20.0, help="partition transitions per second")
    parser.add_argument("--only", choices=["on", "off"], help="one run only")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    if args.serve:
        serve(args.port, args.data_dir, args.tokens, args.write_rate)
        return
    print(f"{args.streams} SSE streams, {args.rate:g} polls/s over {args.tokens} tokens for {args.seconds:g} s "
          f"(reference {args.reference_seconds:g} s), "
          f"{args.write_rate:g} transitions/s", flush=True)
    results = {}
    for shedding in (True, False):
        if args.only and args.only != ("on" if shedding else "off"):
            continue
        seconds = args.seconds if shedding else args.reference_seconds
        results[shedding] = asyncio.run(measure(shedding, seconds, args))
        print(json.dumps(results[shedding]), flush=True)
    if len(results) == 2:
        print()
        print(report(results[True], results[False]))


if __name__ == "__main__":
    main()
