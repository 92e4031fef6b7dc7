"""Farm throughput, two ways: proofs per minute with real engines, or the ledger's write rate.

    .venv/bin/python bench/farm.py                       # engines 1,2,4; the default backlog
    .venv/bin/python bench/farm.py --engines 1,2 --backlog porep-c2=1,winning-post=4
    .venv/bin/python bench/farm.py --writes --engines 1,2,4 --seconds 10 --json farm-writes.json

Placement by key (``--placement``): the same farm twice, ``PROVINGSITE_PLACEMENT=0`` (first
come, first served) then on, 2 engines by default, a backlog of jobs of 4 circuits (the four
built-in kinds) all at normal priority and submitted interleaved, so the queue's head changes
circuit from job to job. Per run: key loads (each host's first partition of a circuit loads its
key, plus any key evicted and loaded again: counted from the engines' "evicted" lines, an upper
bound), proofs/min, and the share of partitions proved on a host that already held the key
(every partition but the ones that loaded it); then on/off ratios.

    .venv/bin/python bench/farm.py --placement [--engines 2] [--backlog …] [--placement-wait 3] [--placement-budget 5MiB]

Proofs per minute (the default). Each run is a fresh farm (a PostgreSQL database copied from
one migrated template, its own Redis db number, its own data directories), the same backlog
submitted at once after every engine heartbeats, scale tiny, CPU backend. Times come from the
records (submitted_at, claimed_at, synth_started_at, finished_at), so the figures are what the
farm did, not what this script saw. Needs PostgreSQL and Redis (the same ones as the farm tests).

Claim latency: claim → synthesizing (``claimed_at`` → ``synth_started_at``) per partition,
p50/p99, the queue wait (job submitted → partition claimed), and — where PostgreSQL's log is
readable (``--pg-log``) — the claim query itself: the bench database gets
``log_min_duration_statement = 0`` and every logged statement with ``SKIP LOCKED`` is timed.

Ledger writes (``--writes``): transitions per second that 1, 2 and 4 engine hosts commit to
one PostgreSQL ledger, measured on the ledger alone. Nothing is proved, synthesized or
loaded: each engine is a process that does only the writes a real engine makes, back to back,
through the ledger's own APIs, so the figure is the farm's write ceiling (the one StatusClock
row every write increments is the suspect), not a proving rate. Per engine count, from scratch:

* a fresh database (``--database``, dropped and recreated, migrated; never the test suite's);
* a backlog of jobs submitted as the API submits them (engine.ledger.submission), then
  ANALYZE (the planner statistics a live farm's autovacuum keeps);
* N processes (spawned), each registering its own host and worker slots as ``runengine`` does
  (engine.ledger.hosts) and making its StatusWriter; then, all from one start time, for
  ``--seconds``: ``claim(--claim)`` (the dispatcher claims 1 at a time), then each claimed
  partition walked reserving → synthesizing → synth_done → gpu → finalizing → done with
  ``apply()``, each transition carrying the fields the pipeline's stage sets (synth_started_at
  and reserved_bytes, synth_finished_at, the worker and gpu_started_at, gpu_finished_at, a
  proof-sized proof, publics and vk digest); the last partition of a job settles it. A
  heartbeat thread per engine does what Engine.beat does to the ledger every ``--heartbeat``
  s: ``beat(heartbeat_at, devices)`` and the rescue of lapsed leases (none lapse here).

A transition is one partition's state change committed: a claimed partition (pending →
reserving) or one apply(). Reported per N: transitions/s in total and per engine, the ratio to
the first engine count of the same command (the in-command reference), apply() and claim()
latency p50/p99 (client side, the writer's lock and the commit included), refused writes and
database errors (deadlocks and the like, by message), and partitions still pending after the
window (0 means the backlog ran dry and the row is not a throughput figure). With
``--lock-sample`` (on by default) pg_stat_activity is sampled through the window: "waiting:
clock" is the mean share of the engines' writers waiting for a lock inside the clock's UPDATE,
"any lock" for any lock at all.

The engines, their heartbeats and the PostgreSQL server share this machine's CPUs: on a box
with fewer cores than engines the scaling is bounded by the CPU as well as by the locks, so
say how many cores the figures came from (the output prints it). Hints go to the in-memory
channel layer (REDIS_URL is ignored), as on a single-process farm.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._table import markdown_table  # noqa: E402
from tests.farm.harness import (  # noqa: E402
    Farm,
    FarmTemplate,
    batch,
    completion_problems,
    ensure_params,
    postgres_available,
    redis_available,
)


@dataclass
class Run:
    engines: int
    jobs: int
    partitions: int
    wall_s: float  # first submission → last job finished
    busy_s: float  # first claim → last partition finished
    claim_to_synth_ms: list[float]
    queue_ms: list[float]
    per_host: dict[str, int]
    problems: list[str]
    claim_query_ms: list[float]
    label: str = ""
    key_loads: int = 0  # first partition of a circuit on a host, plus evictions (each may have reloaded)
    evictions: int = 0
    held: int = 0  # partitions proved on a host that already held (or was loading) their key

    @property
    def held_share(self) -> float:
        return self.held / self.partitions if self.partitions else float("nan")

    @property
    def proofs_per_min(self) -> float:
        return self.partitions / self.wall_s * 60

    @property
    def jobs_per_min(self) -> float:
        return self.jobs / self.wall_s * 60


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def parse_backlog(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in text.split(","):
        kind, _, count = item.partition("=")
        out[kind.strip()] = int(count)
    return out


LOG_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
DURATION = re.compile(r"duration: ([\d.]+) ms\s+(?:statement|execute [^:]*):(.*)", re.DOTALL)


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def claim_query_durations(path: Path | None, offset: int) -> list[float]:
    """Durations of the logged statements that claim (… FOR UPDATE SKIP LOCKED)."""
    if path is None:
        return []
    try:
        with open(path, errors="replace") as log:
            log.seek(offset)
            text = log.read()
    except OSError:
        return []
    entries: list[str] = []
    for line in text.splitlines():
        if LOG_ENTRY.match(line) or not entries:
            entries.append(line)
        else:
            entries[-1] += "\n" + line
    out = []
    for entry in entries:
        match = DURATION.search(entry)
        if match and "SKIP LOCKED" in match.group(2).upper():
            out.append(float(match.group(1)))
    return out


def interleaved(prefix: str, backlog: dict[str, int]) -> list[tuple[str, str, dict[str, Any]]]:
    """The backlog's jobs one kind after another (a, b, c, d, a, b, …), not kind by kind."""
    by_kind: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for job in batch(prefix, backlog):
        by_kind.setdefault(job[0], []).append(job)
    out = []
    for i in range(max(map(len, by_kind.values()), default=0)):
        out += [jobs[i] for jobs in by_kind.values() if i < len(jobs)]
    return out


EVICTED = re.compile(r"evicted idle proving key")


def key_figures(parts: list[dict[str, Any]], circuit_of: dict[str, str], logs: list[str]) -> tuple[int, int, int]:
    """(key loads, evictions, partitions whose host already held the key): a host's first
    partition of a circuit, in claim order, is the one that loaded its key."""
    seen: set[tuple[str, str]] = set()
    first = 0
    for p in sorted(parts, key=lambda p: (p["claimed_at"] is None, p["claimed_at"] or 0)):
        where = (p["host_name"] or "?", circuit_of[p["job_name"]])
        if where not in seen:
            seen.add(where)
            first += 1
    evictions = sum(len(EVICTED.findall(log)) for log in logs)
    return first + evictions, evictions, len(parts) - first - evictions


def run_once(template: FarmTemplate, engines: int, backlog: dict[str, int], root: Path, redis_db: int,
             timeout: float, pg_log: Path | None, label: str = "", env: dict[str, str] | None = None,
             priority: int | None = None) -> Run:
    farm = Farm.create(template, root / f"engines-{engines}{label}", redis_db)
    offset = log_size(pg_log)
    try:
        if pg_log is not None:
            with farm.connect() as conn:
                conn.execute(f'ALTER DATABASE "{farm.database}" SET log_min_duration_statement = 0')
        hosts = [farm.start_engine(f"bench-{engines}-{i}", wait=False, **(env or {})) for i in range(engines)]
        for host in hosts:
            farm.wait_engine_ready(host, timeout=180)
        backlog_jobs = interleaved(f"bench-{engines}", backlog) if label else batch(f"bench-{engines}", backlog)
        jobs = farm.submit(backlog_jobs, priority=priority)
        farm.wait_jobs_finished(jobs, timeout=timeout, watch=hosts)
        times = farm.one(
            "SELECT min(j.submitted_at) AS submitted, max(j.finished_at) AS finished, "
            "min(p.claimed_at) AS first_claim, max(p.finished_at) AS last_done "
            "FROM engine_proofjob j JOIN engine_partition p ON p.job_id = j.id WHERE j.job_id = ANY(%s)", jobs)
        assert times is not None
        parts = farm.partitions(jobs)
        claim_to_synth = [(p["synth_started_at"] - p["claimed_at"]).total_seconds() * 1000 for p in parts
                          if p["claimed_at"] and p["synth_started_at"]]
        submitted = {j["job_id"]: j["submitted_at"] for j in farm.jobs(jobs)}
        queue = [(p["claimed_at"] - submitted[p["job_name"]]).total_seconds() * 1000 for p in parts if p["claimed_at"]]
        per_host: dict[str, int] = {}
        for p in parts:
            per_host[p["host_name"] or "?"] = per_host.get(p["host_name"] or "?", 0) + 1
        circuit_of = {j["job_id"]: j["circuit_id"] for j in farm.jobs(jobs)}
        loads, evictions, held = key_figures(parts, circuit_of, [h.log() for h in hosts])
        return Run(
            engines=engines, jobs=len(jobs), partitions=len(parts),
            wall_s=(times["finished"] - times["submitted"]).total_seconds(),
            busy_s=(times["last_done"] - times["first_claim"]).total_seconds(),
            claim_to_synth_ms=claim_to_synth, queue_ms=queue, per_host=per_host,
            problems=completion_problems(farm, jobs),
            claim_query_ms=claim_query_durations(pg_log, offset),
            label=label, key_loads=loads, evictions=evictions, held=held,
        )
    finally:
        farm.destroy()


def report(runs: list[Run]) -> str:
    base = runs[0]
    rows = [
        ("engine processes", lambda r: f"{r.engines}"),
        ("jobs / partitions", lambda r: f"{r.jobs} / {r.partitions}"),
        ("wall (submit → last done)", lambda r: f"{r.wall_s:.1f} s"),
        ("busy (first claim → last done)", lambda r: f"{r.busy_s:.1f} s"),
        ("partition proofs / min", lambda r: f"{r.proofs_per_min:.1f}"),
        ("job proofs / min", lambda r: f"{r.jobs_per_min:.1f}"),
        ("ratio to 1 engine", lambda r: f"{r.proofs_per_min / base.proofs_per_min:.2f}×"),
        ("claim → synth p50 / p99", lambda r: f"{percentile(r.claim_to_synth_ms, 50):.0f} / "
                                              f"{percentile(r.claim_to_synth_ms, 99):.0f} ms"),
        ("claim query p50 / p99 (n)", lambda r: f"{percentile(r.claim_query_ms, 50):.1f} / "
                                                f"{percentile(r.claim_query_ms, 99):.1f} ms ({len(r.claim_query_ms)})"
                                                if r.claim_query_ms else "—"),
        ("queue wait p50 / p99", lambda r: f"{percentile(r.queue_ms, 50) / 1000:.1f} / "
                                           f"{percentile(r.queue_ms, 99) / 1000:.1f} s"),
        ("partitions per host", lambda r: " ".join(str(n) for _, n in sorted(r.per_host.items()))),
        ("completion problems", lambda r: str(len(r.problems))),
    ]
    width = max(len(label) for label, _ in rows)
    lines = []
    for label, cell in rows:
        lines.append(f"{label:<{width}}  " + "  ".join(f"{cell(r):>18}" for r in runs))
    return "\n".join(lines)


def placement_report(off: Run, on: Run) -> str:
    """Placement off and on side by side, and on/off ratios (off is the reference)."""
    rows: list[tuple[str, Callable[[Run], float], str]] = [
        ("key loads", lambda r: r.key_loads, "{:.0f}"),
        ("evictions (in the loads)", lambda r: r.evictions, "{:.0f}"),
        ("partition proofs / min", lambda r: r.proofs_per_min, "{:.1f}"),
        ("wall (submit → last done) s", lambda r: r.wall_s, "{:.1f}"),
        ("proved where the key was held", lambda r: r.held_share * 100, "{:.1f} %"),
        ("queue wait p50 s", lambda r: percentile(r.queue_ms, 50) / 1000, "{:.1f}"),
        ("queue wait p99 s", lambda r: percentile(r.queue_ms, 99) / 1000, "{:.1f}"),
    ]
    table = [("", "placement off", "placement on", "on / off")]
    for label, figure, fmt in rows:
        a, b = figure(off), figure(on)
        table.append((label, fmt.format(a), fmt.format(b), f"{b / a:.2f}×" if a else "—"))
    table.append(("partitions per host", " ".join(str(n) for _, n in sorted(off.per_host.items())),
                  " ".join(str(n) for _, n in sorted(on.per_host.items())), ""))
    table.append(("completion problems", str(len(off.problems)), str(len(on.problems)), ""))
    return markdown_table(table[0], table[1:])


def placement_main(args: argparse.Namespace, template_runs: Callable[[Callable[[FarmTemplate, Path], None]], None]) -> int:
    backlog = parse_backlog(args.backlog or PLACEMENT_BACKLOG)
    engines = int(args.engines.split(",")[0])
    print(f"placement by key: {engines} engines, backlog {backlog} at normal priority, interleaved, scale tiny, "
          f"CPU backend, wait {args.placement_wait:g} s, budget {args.placement_budget or '4GiB'} per engine, "
          f"{os.cpu_count()} CPU(s)", flush=True)
    runs: dict[str, Run] = {}

    def both(template: FarmTemplate, tmp: Path) -> None:
        for label, on in (("-off", "0"), ("-on", "1")):
            env = {"PROVINGSITE_PLACEMENT": on, "PROVINGSITE_PLACEMENT_WAIT_S": str(args.placement_wait)}
            if args.placement_budget:
                env["PROVINGSITE_MEMORY_BUDGET"] = args.placement_budget
            started = time.monotonic()
            run = run_once(template, engines, backlog, tmp, args.redis_db, args.timeout, None, label=label, env=env,
                           priority=NORMAL_PRIORITY)
            runs[label] = run
            print(f"  placement {'on' if on == '1' else 'off'}: {run.partitions} partitions in {run.wall_s:.1f} s "
                  f"({run.proofs_per_min:.1f}/min), {run.key_loads} key loads, "
                  f"{run.held_share * 100:.1f} % proved where the key was held "
                  f"(run took {time.monotonic() - started:.0f} s with start-up)", flush=True)
            for problem in run.problems:
                print(f"    problem: {problem}", flush=True)

    template_runs(both)
    print()
    print(placement_report(runs["-off"], runs["-on"]))
    return 1 if any(r.problems for r in runs.values()) else 0


PLACEMENT_BACKLOG = "porep-c2=2,snap-update=2,window-post=4,winning-post=4"
NORMAL_PRIORITY = 2  # engine.states.Priority.NORMAL: every job in one class, so placement may order them


# ---- --writes: the ledger's write throughput ------------------------------------------------
#
# Everything below runs only with --writes. Django is set up inside the functions (settings
# are read at import, and the proofs/min mode above runs no Django in this process).

BENCH_DB = "provingsite_farmbench"
NOT_OURS = frozenset({"test", "test_test", "postgres", "template0", "template1"})  # never dropped here
PG_ADMIN = os.environ.get("PROVINGSITE_FARMBENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres")
WRITES_BACKLOG = "porep-c2=200"  # 2,000 partitions: ~300 go in 10 s on a 2-core box today
# What a proof row holds once done: about the size of a BLS12-381 proof.json and its publics.
FAKE_PROOF: dict[str, object] = {"protocol": "groth16", "curve": "bls12381",
                                 "pi_a": ["1" * 115, "2" * 115, "1"], "pi_b": [["3" * 115, "4" * 115]] * 2 + [["1", "0"]],
                                 "pi_c": ["5" * 115, "6" * 115, "1"]}
FAKE_PUBLICS = ["7" * 76, "8" * 76]
FAKE_VK_DIGEST = "f" * 64  # one key for every partition, or the job fails as "different verifying keys"
CLOCK_WAIT_SQL = """
SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND query ILIKE '%%engine_statusclock%%'),
       count(*) FILTER (WHERE wait_event_type = 'Lock')
FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()
"""


@dataclass
class EngineResult:
    """What one engine process did inside the timed window."""

    host: str
    claims: int = 0  # claim() calls that returned work
    claimed: int = 0  # partitions those claims took (pending → reserving)
    applies: int = 0  # apply() commits
    done: int = 0  # partitions walked to done
    refused: int = 0  # apply() refused (stale claim or illegal transition)
    errors: dict[str, int] = field(default_factory=dict)  # database errors by message head (deadlocks …)
    dry: int = 0  # claim() calls that found nothing
    beats: int = 0
    apply_ms: list[float] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)

    @property
    def transitions(self) -> int:
        return self.claimed + self.applies


@dataclass
class WritesRun:
    engines: int
    seconds: float
    backlog: int  # partitions submitted
    results: list[EngineResult]
    pending_after: int  # partitions still pending after the window (0: the backlog ran dry)
    done_in_db: int  # partitions the database holds as done (a cross-check of the engines' counts)
    jobs_done_in_db: int
    samples: int = 0  # pg_stat_activity samples taken in the window
    clock_waiters: int = 0  # sum over samples of backends waiting for a lock inside the clock UPDATE
    lock_waiters: int = 0  # sum over samples of backends waiting for any lock

    @property
    def transitions(self) -> int:
        return sum(r.transitions for r in self.results)

    @property
    def per_s(self) -> float:
        return self.transitions / self.seconds

    @property
    def apply_ms(self) -> list[float]:
        return [ms for r in self.results for ms in r.apply_ms]

    @property
    def claim_ms(self) -> list[float]:
        return [ms for r in self.results for ms in r.claim_ms]

    @property
    def clock_wait_share(self) -> float:
        """Mean share of the engines' writers waiting on the clock row (sampled)."""
        return self.clock_waiters / (self.samples * self.engines) if self.samples else float("nan")

    @property
    def lock_wait_share(self) -> float:
        return self.lock_waiters / (self.samples * self.engines) if self.samples else float("nan")

    def summary(self) -> dict[str, Any]:
        errors: dict[str, int] = {}
        for r in self.results:
            for key, count in r.errors.items():
                errors[key] = errors.get(key, 0) + count
        return {
            "engines": self.engines, "seconds": self.seconds, "backlog_partitions": self.backlog,
            "transitions": self.transitions, "transitions_per_s": self.per_s,
            "per_engine_per_s": self.per_s / self.engines,
            "apply_p50_ms": percentile(self.apply_ms, 50), "apply_p99_ms": percentile(self.apply_ms, 99),
            "claim_p50_ms": percentile(self.claim_ms, 50), "claim_p99_ms": percentile(self.claim_ms, 99),
            "refused": sum(r.refused for r in self.results), "errors": errors,
            "dry_claims": sum(r.dry for r in self.results), "pending_after": self.pending_after,
            "partitions_done": sum(r.done for r in self.results), "partitions_done_in_db": self.done_in_db,
            "jobs_done_in_db": self.jobs_done_in_db, "beats": sum(r.beats for r in self.results),
            "lock_samples": self.samples, "clock_wait_share": self.clock_wait_share,
            "lock_wait_share": self.lock_wait_share,
            "per_engine": [{"host": r.host, "transitions": r.transitions, "claimed": r.claimed, "applies": r.applies,
                            "done": r.done, "refused": r.refused, "errors": r.errors, "dry": r.dry, "beats": r.beats}
                           for r in self.results],
        }


def bench_url(database: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + f"/{database}"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def writes_environment(database: str) -> None:
    """This process's (and, inherited, every engine process's) Django settings: the bench
    database, a throwaway data directory, the in-memory channel layer (hints go to nobody)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "provingsite.settings"
    os.environ["DATABASE_URL"] = bench_url(database)
    os.environ["PROVINGSITE_DATA_DIR"] = data_dir = tempfile.mkdtemp(prefix="bench-farm-writes-")
    atexit.register(shutil.rmtree, data_dir, True)
    os.environ.setdefault("LOG_LEVEL", "warning")  # refused writes and other warnings still show
    os.environ.pop("REDIS_URL", None)


def recreate_database(database: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, connect_timeout=5, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')


def drop_database(database: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, connect_timeout=5, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def submit_backlog(backlog: dict[str, int], tag: str) -> int:
    """Submit the jobs as the API does (engine.ledger.submission); returns their partitions."""
    from engine.circuits.kinds import demo_inputs
    from engine.ledger.submission import builtin, submit

    partitions = 0
    for kind, count in backlog.items():
        for i in range(count):
            job, _ = submit(builtin(kind, f"farmbench-{tag}-{kind}-{i}", demo_inputs(kind), None, "tiny"))
            partitions += job.num_partitions
    return partitions


def engine_process(index: int, engines: int, seconds: float, claim_limit: int, heartbeat: float,
                   ready: Any, go: Any, start_at: Any, results: Any) -> None:
    """One engine host in its own process: register as runengine does, then claim and walk
    partitions through their states for ``seconds`` from the shared start time."""
    import django

    django.setup()
    from django.db import DatabaseError, close_old_connections, connection
    from django.utils import timezone

    from engine.ledger.hosts import register_host, worker_rows
    from engine.ledger.writer import Refused, StatusWriter, Transition
    from engine.states import PartitionState as P

    name = f"farmbench-{engines}-{index}"
    host = register_host(name, backend="cpu", memory_budget_bytes=8 << 30, memory_total_bytes=16 << 30,
                         synthesis_max=2)
    workers = worker_rows(host, ["cpu"], 2)  # a partition in gpu names its worker (a constraint)
    writer = StatusWriter(host)
    devices = [{"device": "cpu", "label": "farm bench (no prover)", "memory_total_bytes": None,
                "memory_free_bytes": None, "pool_used_bytes": None}]
    writer.beat(heartbeat_at=timezone.now(), devices=devices)  # Engine.start beats before its threads
    out = EngineResult(host=name)
    stop = threading.Event()

    def heartbeat_forever() -> None:
        # Engine.beat: the host row (heartbeat_at, devices), then the rescue of lapsed leases.
        try:
            while not stop.wait(heartbeat):
                try:
                    writer.beat(heartbeat_at=timezone.now(), devices=devices)
                    writer.requeue_lapsed()
                    out.beats += 1
                except DatabaseError as exc:
                    key = f"heartbeat: {str(exc).splitlines()[0][:80]}"
                    out.errors[key] = out.errors.get(key, 0) + 1
                    close_old_connections()
        finally:
            connection.close()

    ready.put(index)
    go.wait()
    time.sleep(max(0.0, start_at.value - time.time()))
    end = start_at.value + seconds
    beater = threading.Thread(target=heartbeat_forever, name="heartbeat", daemon=True)
    beater.start()
    # The states a partition walks on a real engine, and what each stage writes with it
    # (engine/pipeline: synthesize.py, prove.py, finalize.py).
    steps: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
        (P.SYNTHESIZING, lambda _: {"synth_started_at": timezone.now(), "reserved_bytes": 64 << 20}),
        (P.SYNTH_DONE, lambda _: {"synth_finished_at": timezone.now()}),
        (P.GPU, lambda n: {"worker": workers[n % len(workers)], "gpu_started_at": timezone.now()}),
        (P.FINALIZING, lambda _: {"gpu_finished_at": timezone.now()}),
        (P.DONE, lambda _: {"proof": FAKE_PROOF, "public_inputs": FAKE_PUBLICS, "vk_digest": FAKE_VK_DIGEST,
                            "finished_at": timezone.now()}),
    ]
    walked = 0
    try:
        while time.time() < end:
            t0 = time.perf_counter()
            try:
                claims = writer.claim(claim_limit)
            except DatabaseError as exc:
                key = f"claim: {str(exc).splitlines()[0][:80]}"
                out.errors[key] = out.errors.get(key, 0) + 1
                close_old_connections()
                continue
            if time.time() > end:
                break
            if not claims:
                out.dry += 1
                time.sleep(0.01)
                continue
            out.claim_ms.append((time.perf_counter() - t0) * 1000)
            out.claims += 1
            out.claimed += len(claims)
            for claim in claims:
                walked += 1
                for target, fields in steps:
                    t0 = time.perf_counter()
                    try:
                        writer.apply(Transition(claim, target, fields(walked)))
                    except Refused:
                        out.refused += 1
                        break
                    except DatabaseError as exc:
                        key = f"apply {target}: {str(exc).splitlines()[0][:80]}"
                        out.errors[key] = out.errors.get(key, 0) + 1
                        close_old_connections()
                        break
                    if time.time() > end:
                        break
                    out.apply_ms.append((time.perf_counter() - t0) * 1000)
                    out.applies += 1
                    out.done += target == P.DONE
                if time.time() > end:
                    break
    finally:
        stop.set()
        beater.join(timeout=5)
        connection.close()
        results.put(out)


def lock_sampler(database: str, interval: float, until: float, into: WritesRun) -> None:
    """Every ``interval`` s: how many of the bench database's backends wait for a lock, and how
    many of those wait inside the clock's UPDATE (its row lock)."""
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        while time.time() < until:
            row = conn.execute(CLOCK_WAIT_SQL, (database,)).fetchone()
            if row is not None:
                into.samples += 1
                into.clock_waiters += int(row[0])
                into.lock_waiters += int(row[1])
            time.sleep(interval)


def collect(queue: Any, procs: list[Any], timeout: float) -> list[Any]:
    """One item from each engine process, failing fast (by name) if one dies first."""
    import queue as queue_mod

    items: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(items) < len(procs):
        try:
            items.append(queue.get(timeout=0.5))
        except queue_mod.Empty:
            dead = [p.name for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.terminate()
                raise RuntimeError(f"engine process(es) {', '.join(dead)} died (see above)" if dead else
                                   f"no answer from the engine processes within {timeout:.0f} s") from None
    return items


def writes_once(engines: int, args: argparse.Namespace, backlog: dict[str, int]) -> WritesRun:
    import multiprocessing as mp

    from django.core.management import call_command
    from django.db import connections

    from engine.models import Partition, ProofJob

    connections.close_all()
    say(f"==> {engines} engine(s): fresh database {args.database}, migrating")
    recreate_database(args.database)
    call_command("migrate", verbosity=0)
    started = time.monotonic()
    partitions = submit_backlog(backlog, f"{engines}e")
    say(f"    submitted {sum(backlog.values())} jobs, {partitions} partitions ({time.monotonic() - started:.1f} s)")
    # Planner statistics as a live farm's autovacuum keeps them: without them the claim query
    # on freshly filled tables picks a nested loop several times slower, and autovacuum might
    # analyze in the middle of one window and not of another.
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE")
    connections.close_all()  # the engines are the only writers in the window

    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go, start_at = ctx.Event(), ctx.Value("d", 0.0)
    procs = [ctx.Process(target=engine_process, name=f"farmbench-{engines}-{i}",
                         args=(i, engines, args.seconds, args.claim, args.heartbeat, ready, go, start_at, results))
             for i in range(engines)]
    for proc in procs:
        proc.start()
    collect(ready, procs, 120)
    say(f"    {engines} host(s) registered; {args.seconds:g} s window starting")
    start_at.value = time.time() + 0.5
    go.set()
    run = WritesRun(engines=engines, seconds=args.seconds, backlog=partitions, results=[], pending_after=0,
                    done_in_db=0, jobs_done_in_db=0)
    sampler = None
    if args.lock_sample > 0:
        sampler = threading.Thread(target=lock_sampler, daemon=True,
                                   args=(args.database, args.lock_sample, start_at.value + args.seconds, run))
        time.sleep(max(0.0, start_at.value - time.time()))
        sampler.start()
    run.results.extend(collect(results, procs, args.seconds + 120))
    for proc in procs:
        proc.join(timeout=30)
    if sampler is not None:
        sampler.join()
    run.results.sort(key=lambda r: r.host)
    run.pending_after = Partition.objects.filter(state="pending").count()
    run.done_in_db = Partition.objects.filter(state="done").count()
    run.jobs_done_in_db = ProofJob.objects.filter(state="done").count()
    connections.close_all()
    failed = [p.name for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"engine process(es) {', '.join(failed)} exited abnormally")
    say(f"    {run.transitions} transitions ({run.per_s:.0f}/s), {sum(r.refused for r in run.results)} refused, "
        f"{sum(sum(r.errors.values()) for r in run.results)} errors, {run.pending_after} partitions still pending")
    return run


def writes_report(runs: list[WritesRun]) -> str:
    rows = []
    for r in runs:
        errors = sum(sum(e.errors.values()) for e in r.results)
        rows.append([
            r.engines, f"{r.per_s:.0f}", f"{r.per_s / r.engines:.0f}",
            f"{r.per_s / runs[0].per_s:.2f}×",
            f"{percentile(r.apply_ms, 50):.2f} / {percentile(r.apply_ms, 99):.2f}",
            f"{percentile(r.claim_ms, 50):.2f} / {percentile(r.claim_ms, 99):.2f}",
            f"{r.clock_wait_share:.0%} / {r.lock_wait_share:.0%}" if r.samples else "—",
            sum(e.refused for e in r.results), errors, r.pending_after,
        ])
    first = runs[0].engines
    return markdown_table(
        ["engines", "transitions/s", "per engine", f"vs {first} engine{'s' if first != 1 else ''}",
         "apply p50 / p99 ms", "claim p50 / p99 ms", "waiting: clock / any lock", "refused", "errors",
         "pending after"], rows)


def code_version(repo: Path) -> str:
    """The commit the measured code is at, "+changes" when its engine/ or provingsite/ differ from it."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--",
                                "engine", "provingsite"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit"
    return head + (" +changes" if dirty else "")


def writes_main(args: argparse.Namespace) -> int:
    if args.database in NOT_OURS or args.database.startswith("test"):
        print(f"--database {args.database!r} is not this bench's to drop; name another", file=sys.stderr)
        return 2
    try:
        recreate_database(args.database)
    except Exception as exc:
        print(f"PostgreSQL at {PG_ADMIN} not usable ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    writes_environment(args.database)
    import django

    django.setup()
    import engine

    backlog = parse_backlog(args.backlog or WRITES_BACKLOG)
    counts = [int(x) for x in args.engines.split(",")]
    say(f"ledger write bench: engines {counts}, {args.seconds:g} s each, claim {args.claim} at a time, "
        f"heartbeat every {args.heartbeat:g} s, backlog {backlog}, database {bench_url(args.database)}, "
        f"{os.cpu_count()} CPU(s) here")
    code = Path(engine.__file__).resolve().parents[1]
    say(f"the ledger under test: {code} at {code_version(code)}")
    runs: list[WritesRun] = []
    try:
        for n in counts:
            runs.append(writes_once(n, args, backlog))
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(args.database)
    print(f"PostgreSQL ledger writes, no proving: {args.seconds:g} s per row, backlog {runs[0].backlog if runs else 0} "
          f"partitions per row, claim {args.claim}, heartbeat {args.heartbeat:g} s, {os.cpu_count()} CPU(s) shared "
          f"by the engines and the server")
    print(writes_report(runs))
    dry = [r.engines for r in runs if r.pending_after == 0]
    if dry:
        print(f"warning: the backlog ran dry with {dry} engine(s): raise --backlog", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "claim": args.claim,
                                               "heartbeat_s": args.heartbeat, "backlog": backlog,
                                               "runs": [r.summary() for r in runs]}, indent=2) + "\n")
        say(f"figures written to {args.json}")
    return 1 if dry else 0


def with_template(body: Callable[[FarmTemplate, Path], None]) -> None:
    """``body(template, tmp)`` with the keys made, a migrated template and a scratch directory."""
    ensure_params()
    template = FarmTemplate(tag="bench").create()
    try:
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            body(template, Path(tmp))
    finally:
        template.destroy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="1,2,4", help="engine process counts, comma-separated")
    parser.add_argument("--backlog", default=None,
                        help="kind=count,… submitted at once to every run (default "
                             "porep-c2=2,snap-update=1,window-post=2,winning-post=4; with --writes "
                             f"{WRITES_BACKLOG})")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--pg-log", default="/var/log/postgresql/postgresql-15-main.log",
                        help="PostgreSQL's server log, to time the claim query ('' to skip)")
    placing = parser.add_argument_group("placement by key (--placement)")
    placing.add_argument("--placement", action="store_true",
                         help="run placement off then on (2 engines unless --engines), and print the ratios")
    placing.add_argument("--placement-wait", type=float, default=3.0,
                         help="PROVINGSITE_PLACEMENT_WAIT_S for the engines of the 'on' run")
    placing.add_argument("--placement-budget", default="",
                         help="each engine's memory budget (e.g. 5MiB: two tiny keys and the partitions in flight, "
                              "as a production host holds two of its 33-57 GiB keys); default the farm's 4GiB")
    writes = parser.add_argument_group("ledger writes (--writes)")
    writes.add_argument("--writes", action="store_true",
                        help="measure the ledger's write throughput (transitions/s), no proving")
    writes.add_argument("--seconds", type=float, default=10.0, help="timed window per engine count")
    writes.add_argument("--claim", type=int, default=1, help="partitions per claim() (the dispatcher's is 1)")
    writes.add_argument("--heartbeat", type=float, default=0.5, help="seconds between an engine's heartbeats")
    writes.add_argument("--lock-sample", type=float, default=0.05,
                        help="seconds between pg_stat_activity samples of lock waits (0: none)")
    writes.add_argument("--database", default=BENCH_DB,
                        help=f"the database to drop, create and use (on {PG_ADMIN.rsplit('/', 1)[0]})")
    writes.add_argument("--keep", action="store_true", help="keep the last engine count's database")
    writes.add_argument("--json", default="", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.writes:
        return writes_main(args)
    writes_only = {"--seconds", "--claim", "--heartbeat", "--lock-sample", "--database", "--keep", "--json"}
    stray = [a.split("=")[0] for a in sys.argv[1:] if a.split("=")[0] in writes_only]
    if stray:
        parser.error(f"{', '.join(stray)}: options of --writes (the ledger write bench); add --writes")
    if args.placement and "--engines" not in " ".join(sys.argv):
        args.engines = "2"
    for available, reason in (postgres_available(), redis_available()):
        if not available:
            print(reason, file=sys.stderr)
            return 2
    if args.placement:
        return placement_main(args, with_template)
    args.backlog = args.backlog or "porep-c2=2,snap-update=1,window-post=2,winning-post=4"
    backlog = parse_backlog(args.backlog)
    pg_log = Path(args.pg_log) if args.pg_log and Path(args.pg_log).is_file() else None
    print(f"backlog: {backlog} at scale tiny, CPU backend", flush=True)
    ensure_params()
    template = FarmTemplate(tag="bench").create()
    runs: list[Run] = []
    try:
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            for n in (int(x) for x in args.engines.split(",")):
                started = time.monotonic()
                run = run_once(template, n, backlog, Path(tmp), args.redis_db, args.timeout, pg_log)
                runs.append(run)
                print(f"  {n} engine(s): {run.partitions} partitions in {run.wall_s:.1f} s "
                      f"({run.proofs_per_min:.1f}/min; run took {time.monotonic() - started:.0f} s with start-up)",
                      flush=True)
                for problem in run.problems:
                    print(f"    problem: {problem}", flush=True)
    finally:
        template.destroy()
    print()
    print(report(runs))
    return 1 if any(r.problems for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
