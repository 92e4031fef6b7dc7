"""Farm throughput: proofs per minute with 1, 2 and 4 engine processes, and claim latency.

    .venv/bin/python bench/farm.py                       # engines 1,2,4; the default backlog
    .venv/bin/python bench/farm.py --engines 1,2 --backlog porep-c2=1,winning-post=4

Each run is a fresh farm (a PostgreSQL database copied from one migrated template, its own
Redis db number, its own data directories), the same backlog submitted at once after every
engine heartbeats, scale tiny, CPU backend. Times come from the records (submitted_at,
claimed_at, synth_started_at, finished_at), so the figures are what the farm did, not what
this script saw. Needs PostgreSQL and Redis (the same ones as the farm tests).

Claim latency: claim → synthesizing (``claimed_at`` → ``synth_started_at``) per partition,
p50/p99, the queue wait (job submitted → partition claimed), and — where PostgreSQL's log is
readable (``--pg-log``) — the claim query itself: the bench database gets
``log_min_duration_statement = 0`` and every logged statement with ``SKIP LOCKED`` is timed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def run_once(template: FarmTemplate, engines: int, backlog: dict[str, int], root: Path, redis_db: int,
             timeout: float, pg_log: Path | None) -> Run:
    farm = Farm.create(template, root / f"engines-{engines}", redis_db)
    offset = log_size(pg_log)
    try:
        if pg_log is not None:
            with farm.connect() as conn:
                conn.execute(f'ALTER DATABASE "{farm.database}" SET log_min_duration_statement = 0')
        hosts = [farm.start_engine(f"bench-{engines}-{i}", wait=False) for i in range(engines)]
        for host in hosts:
            farm.wait_engine_ready(host, timeout=180)
        jobs = farm.submit(batch(f"bench-{engines}", backlog))
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
        return Run(
            engines=engines, jobs=len(jobs), partitions=len(parts),
            wall_s=(times["finished"] - times["submitted"]).total_seconds(),
            busy_s=(times["last_done"] - times["first_claim"]).total_seconds(),
            claim_to_synth_ms=claim_to_synth, queue_ms=queue, per_host=per_host,
            problems=completion_problems(farm, jobs),
            claim_query_ms=claim_query_durations(pg_log, offset),
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="1,2,4", help="engine process counts, comma-separated")
    parser.add_argument("--backlog", default="porep-c2=2,snap-update=1,window-post=2,winning-post=4",
                        help="kind=count,… submitted at once to every run")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--pg-log", default="/var/log/postgresql/postgresql-15-main.log",
                        help="PostgreSQL's server log, to time the claim query ('' to skip)")
    args = parser.parse_args()
    for available, reason in (postgres_available(), redis_available()):
        if not available:
            print(reason, file=sys.stderr)
            return 2
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
