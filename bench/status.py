"""Status read bench: /status's reader and a full console render pass, p50/p99, while a writer
moves partitions through their states, at 100, 1,000 and 5,000 active partitions.

    .venv/bin/python bench/status.py                       # SQLite and (if reachable) PostgreSQL
    .venv/bin/python bench/status.py --databases sqlite --sizes 1000 --reads 300

Each database runs in a child process of its own (settings are read at import): a fresh
SQLite file in a temporary data directory, or a fresh PostgreSQL database made for the run
and dropped after it. The farm: one host, 8 workers each proving one partition, the rest of
the partitions spread over pending, synthesizing, synth_done and finalizing, in jobs of 16
partitions. A writer thread commits transitions back to back the way the engine does (the
status clock and the rows in one transaction): a partition leaves gpu for finalizing, another
takes its worker.

Beside today's reader (one snapshot) it times the reader this project had before, kept here
only: independent statements, retried while the status clock moves (up to 5 attempts), and
counts how often it gave up ("torn": its `consistent` was false).
"""

from __future__ import annotations

import argparse
import json
import os
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
PG_ADMIN = os.environ.get("PROVINGSITE_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
PG_BENCH_DB = "provingsite_bench_status"
PER_JOB = 16
WORKERS = 8
LIVE_STATES = ["reserving", "synthesizing", "synth_done", "finalizing"]


# ---- inside the child ----------------------------------------------------------------------


def build_farm(active: int) -> None:
    from engine.ledger.clock import ensure_clock
    from engine.models import EngineHost, Partition, ProofJob, Worker

    ProofJob.objects.all().delete()
    EngineHost.objects.all().delete()
    ensure_clock()
    from django.utils import timezone

    now = timezone.now()
    host = EngineHost.objects.create(name="bench-host", started_at=now, heartbeat_at=now, memory_budget_bytes=1 << 34)
    workers = [Worker.objects.create(host=host, device="cpu", ordinal=i) for i in range(WORKERS)]
    jobs = ProofJob.objects.bulk_create(
        ProofJob(job_id=f"bench-{j}", kind="snap-update", num_partitions=PER_JOB, state="running", started_at=now)
        for j in range(-(-active // PER_JOB)))
    parts = []
    for n in range(active):
        job = jobs[n // PER_JOB]
        state = "gpu" if n < WORKERS else LIVE_STATES[n % len(LIVE_STATES)]
        parts.append(Partition(job=job, index=n % PER_JOB, state=state, host=host,
                               worker=workers[n] if n < WORKERS else None, synth_started_at=now,
                               gpu_started_at=now if state == "gpu" else None))
    Partition.objects.bulk_create(parts)


class Writer(threading.Thread):
    """Moves a gpu partition to finalizing and a synth_done one onto the freed worker, again and again."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.commits = 0

    def run(self) -> None:
        from django.db import connection, transaction
        from django.utils import timezone

        from engine.ledger.clock import next_stamp
        from engine.models import Partition

        try:
            while not self.stop.is_set():
                with transaction.atomic():
                    version = next_stamp().version
                    leaving = Partition.objects.filter(state="gpu").order_by("gpu_started_at", "pk").first()
                    coming = Partition.objects.filter(state="synth_done").order_by("pk").first()
                    if leaving is None or coming is None:
                        break
                    worker, now = leaving.worker_id, timezone.now()
                    Partition.objects.filter(pk=leaving.pk).update(state="finalizing", gpu_finished_at=now, version=version)
                    Partition.objects.filter(pk=coming.pk).update(state="gpu", worker_id=worker, gpu_started_at=now,
                                                                  version=version)
                    # Keep the mix steady: the finalized one comes back as synthesized work.
                    Partition.objects.filter(pk=leaving.pk).update(state="synth_done", worker=None)
                self.commits += 1
                time.sleep(0.002)
        finally:
            connection.close()


def old_reader() -> dict[str, Any]:
    """The reader before one_snapshot: independent statements, retried while the clock moves."""
    from django.utils import timezone

    from engine.status.farm import status_document
    from engine.status.read_model import Farm
    from engine.status.records import clocks
    from engine.status.records import current_version as _current_version

    for _ in range(5):
        before = _current_version()
        body = status_document(Farm(timezone.now(), clocks(), exact=False).read_all())
        if _current_version() == before:
            return {"version": before, "consistent": True, **body}
    return {"version": before, "consistent": False, **body}


def timed(fn: Any, reads: int) -> tuple[list[float], int]:
    # One pass first, untimed: a server's first pass imports the URL configuration and
    # templates and makes every pipeline cell; the figures are of the passes after it.
    fn()
    times, torn = [], 0
    for _ in range(reads):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
        torn += isinstance(out, dict) and out.get("consistent") is False
    return times, torn


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def child(sizes: list[int], reads: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from engine.console.render import render
    from engine.status.farm import farm_snapshot

    rows = []
    for size in sizes:
        build_farm(size)
        n = max(20, reads * 1000 // max(size, 1000))
        writer = Writer()
        writer.start()
        try:
            figures = {name: timed(fn, n) for name, fn in
                       (("status", farm_snapshot), ("render", render), ("old", old_reader))}
        finally:
            writer.stop.set()
            writer.join()
        row: dict[str, Any] = {"active": size, "reads": n, "writer_commits": writer.commits}
        for name, (times, torn) in figures.items():
            row[f"{name}_p50"], row[f"{name}_p99"] = pct(times, 50), pct(times, 99)
            if name == "old":
                row["old_torn"] = torn
        rows.append(row)
    print(json.dumps(rows))


# ---- the parent ----------------------------------------------------------------------------


def postgres_ready() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=3, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB}")
            conn.execute(f"CREATE DATABASE {PG_BENCH_DB}")
        return True
    except Exception as exc:  # no server: say so and bench SQLite alone
        print(f"PostgreSQL at {PG_ADMIN} not usable ({type(exc).__name__}); SQLite only", file=sys.stderr)
        return False


def run_database(name: str, sizes: list[int], reads: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-status-") as data_dir:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "provingsite.settings", "PROVINGSITE_DATA_DIR": data_dir}
        env.pop("DATABASE_URL", None)
        if name == "postgresql":
            env["DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{PG_BENCH_DB}"
        print(f"==> {name}: building farms of {', '.join(map(str, sizes))} active partitions", file=sys.stderr)
        out = subprocess.run([sys.executable, __file__, "--child", "--sizes", ",".join(map(str, sizes)),
                              "--reads", str(reads)], env=env, cwd=ROOT, check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--databases", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--sizes", default="100,1000,5000", help="active partitions per farm")
    parser.add_argument("--reads", type=int, default=200, help="reads per reader at 1,000 partitions (scaled)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        child(sizes, args.reads)
        return
    header = (f"{'database':<11}{'active':>7}{'reads':>6}{'commits':>8} | {'status p50':>10}{'p99':>8} | "
              f"{'render p50':>10}{'p99':>8} | {'old p50':>8}{'p99':>8}{'torn':>6} | {'old/new p99':>11}")
    rows_out = []
    for name in args.databases.split(","):
        if name == "postgresql" and not postgres_ready():
            continue
        try:
            for row in run_database(name, sizes, args.reads):
                rows_out.append(
                    f"{name:<11}{row['active']:>7}{row['reads']:>6}{row['writer_commits']:>8} | "
                    f"{row['status_p50']:>8.1f}ms{row['status_p99']:>6.1f}ms | {row['render_p50']:>8.1f}ms"
                    f"{row['render_p99']:>6.1f}ms | {row['old_p50']:>6.1f}ms{row['old_p99']:>6.1f}ms"
                    f"{row['old_torn']:>6} | {row['old_p99'] / row['status_p99']:>10.2f}x")
        finally:
            if name == "postgresql":
                import psycopg

                with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB}")
    print(header)
    print("\n".join(rows_out))


if __name__ == "__main__":
    main()
