"""The capacity simulator against reality: run a recorded engine workload, replay it, compare.

    .venv/bin/python bench/capacity.py                                  # both workloads, tiny, CPU
    .venv/bin/python bench/capacity.py --workload backlog --jobs 6      # bench/engine.py's own run
    .venv/bin/python bench/capacity.py --workload arrivals --jobs 40 --interval 0.5

Each workload runs one real engine (bench/engine.py's settings: scale, devices, budget,
synthesis slots, workers per device) on a fresh SQLite database, leaving its records; then
engine.status.capacity reads those records for the run's range, exactly as
``GET /api/v1/capacity`` does, and replays the arrivals on one host of the recorded shape
with the recorded service times. Printed: the device's load over the run (its recorded
device time over the range), the measured and the predicted p50/p95 of the wait from
submission to first claim and to done, and their ratio (predicted / measured): predicted
with service times drawn from the circuit's records, as ``/api/v1/capacity`` does (the mean
over ``--seeds`` draws, and their range), and with each job's own recorded times (a trace
replay: what is left is the simulator's rules); then the same range on other farms (hosts and
memory budgets), with the cost per proof where the engine was given
``PROVINGSITE_HOST_COST_PER_HOUR``.

* ``backlog``: bench/engine.py's run itself (``bench.engine.run``): ``--jobs`` porep-c2 jobs
  of 10 partitions submitted at once, then proved by one engine with split proving;
* ``arrivals``: ``--jobs`` jobs of a mix of kinds (winning-post, window-post of 2
  partitions, porep-c2; or ``--kind`` alone) submitted while the engine runs, at exponential
  intervals of mean ``--interval`` seconds (seeded), so the waits come from queueing, not
  from a backlog.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench import engine as engine_bench  # noqa: E402  (sets up Django on a fresh data dir)
from bench._table import markdown_table  # noqa: E402
from engine.circuits.kinds import validate_inputs  # noqa: E402
from engine.env import parse_size  # noqa: E402
from engine.format import fmt_bytes  # noqa: E402
from engine.ledger.demo import demo_inputs  # noqa: E402
from engine.ledger.jobs import submit_job  # noqa: E402
from engine.models import ProofJob  # noqa: E402
from engine.pipeline.host import Engine, EngineConfig  # noqa: E402
from engine.status.capacity import Recorded, capacity, recorded, waits  # noqa: E402
from engine.status.capacity_sim import simulate  # noqa: E402

MIX = (("winning-post", 0.4), ("window-post", 0.3), ("porep-c2", 0.3))


def backlog_run(args: argparse.Namespace) -> tuple[datetime, datetime]:
    """bench/engine.py's run (split on) for the first scale; its range."""
    since = timezone.now()
    result = engine_bench.run(args.scales.split(",")[0], True, args.jobs, args)
    print(f"  backlog: {result['partitions']} partitions in {result['wall_s']:.1f}s, "
          f"device busy {result['device_busy']:.3f}", flush=True)
    return since, timezone.now()


def arrivals_run(args: argparse.Namespace) -> tuple[datetime, datetime]:
    """A mix of kinds submitted at exponential intervals while one engine proves them."""
    scale = args.scales.split(",")[0]
    ProofJob.objects.all().delete()
    config = EngineConfig.from_settings(scale=scale, devices=args.devices, budget=args.budget,
                                        synthesis=args.synthesis, workers_per_device=args.workers,
                                        host_name=f"bench-capacity-{scale}")
    engine = Engine(config)
    from engine.circuits.kinds import circuit_for

    mix = MIX if args.kind == "mixed" else ((args.kind, 1.0),)
    for kind, _ in mix:  # keys loaded before the clock starts, as bench/engine.py does
        engine.keycache.checkout(f"{kind}/{scale}", circuit_for(kind, scale).memory.key_bytes)
        engine.keycache.check_in(f"{kind}/{scale}")
    engine.start()
    rng = random.Random(args.seed)
    since = timezone.now()
    try:
        for i in range(args.jobs):
            kind = rng.choices([k for k, _ in mix], weights=[w for _, w in mix])[0]
            inputs, n = validate_inputs(kind, demo_inputs(kind))
            submit_job(kind=kind, job_id=f"capacity-{i}", inputs=inputs, num_partitions=n,
                       circuit_id=f"{kind}/{scale}", scale=scale)
            time.sleep(rng.expovariate(1 / args.interval))
        engine.run_until_idle(poll=0.05)
    finally:
        engine.stop(drain_seconds=10)
    return since, timezone.now()


def key_sizes(circuits: list[str]) -> dict[str, int]:
    """Each circuit's key as the engine holds it (pipeline.keys.held_nbytes, the size its key cache
    trues a reservation up to): a stopped host lists no key, and the estimate runs a little short."""
    from engine.pipeline.keys import held_nbytes, load_proving_key

    return {circuit: held_nbytes(load_proving_key(circuit)) for circuit in circuits}


def _predicted(rec: Recorded, seeds: int) -> dict[str, list[float]]:
    """p50 and p95 of both waits on one host of the recorded shape, per seed."""
    predicted: dict[str, list[float]] = {"claim p50": [], "claim p95": [], "done p50": [], "done p95": []}
    for seed in range(seeds):
        outcome = simulate(rec.scenario(rec.hosts, seed=seed))
        for what in ("claim", "done"):
            w = waits([getattr(j, f"{what}_wait_s") for j in outcome.jobs])
            predicted[f"{what} p50"].append(w["p50_s"] or 0.0)
            predicted[f"{what} p95"].append(w["p95_s"] or 0.0)
    return predicted


def _ratio(predicted: float, measured: float) -> str:
    return f"{predicted / measured:.2f}" if measured else "—"


def compare(name: str, since: datetime, until: datetime, args: argparse.Namespace) -> list[list[Any]]:
    """Measured against predicted: service times drawn from the circuit's records (the mean
    over the seeds, and their spread), and each job's own recorded times (a trace replay)."""
    sizes = key_sizes(sorted({a.circuit for a in recorded(since, until).arrivals}))
    rec = recorded(since, until, sizes)
    drawn = _predicted(rec, args.seeds)
    own = _predicted(recorded(since, until, sizes, own_services=True), 1)
    measured = {}
    for what in ("claim", "done"):
        w = waits([getattr(m, f"{what}_wait_s") for m in rec.measured])
        measured[f"{what} p50"], measured[f"{what} p95"] = w["p50_s"] or 0.0, w["p95_s"] or 0.0
    busy = sum(s.device_s for p in rec.profiles.values() for s in p.services)
    load = busy / (rec.span_s * rec.host.devices) if rec.host and rec.span_s else 0.0
    rows = []
    for key, values in drawn.items():
        mean = statistics.mean(values)
        rows.append([name, f"{load:.2f}", f"wait to {key}", f"{measured[key]:.3f}", f"{mean:.3f}",
                     f"{min(values):.3f}–{max(values):.3f}", _ratio(mean, measured[key]),
                     f"{own[key][0]:.3f}", _ratio(own[key][0], measured[key])])
    return rows


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _cost(value: float | None) -> str:
    return "—" if value is None else f"{value:.5f}"


def farms(since: datetime, until: datetime, budgets: list[int]) -> str:
    circuits = sorted({a.circuit for a in recorded(since, until).arrivals})
    answer = capacity(since, until, budgets=budgets, key_sizes=key_sizes(circuits))
    rows = [[f["hosts"], fmt_bytes(f["memory_budget_bytes"]), _s(f["claim_wait"]["p50_s"]), _s(f["claim_wait"]["p95_s"]),
             _s(f["done_wait"]["p50_s"]), _s(f["done_wait"]["p95_s"]), f["missed_deadlines"], f["failed_jobs"],
             f"{f['proofs_per_hour']:.0f}", _cost(f["cost_per_proof"])] for f in answer["farms"]]
    return markdown_table(["hosts", "budget", "claim p50 s", "claim p95 s", "done p50 s", "done p95 s", "missed",
                           "failed jobs", "proofs/h", "cost/proof"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("backlog", "arrivals", "both"), default="both")
    parser.add_argument("--scales", default="tiny", help="the scale (the first of a list is used)")
    parser.add_argument("--jobs", type=int, default=0, help="jobs per workload (default: backlog 6, arrivals 40)")
    parser.add_argument("--interval", type=float, default=0.5, help="arrivals: mean seconds between submissions")
    parser.add_argument("--kind", default="mixed", help="arrivals: one kind only (e.g. porep-c2) instead of the mix")
    parser.add_argument("--devices", default="cpu")
    parser.add_argument("--budget", default="4GiB")
    parser.add_argument("--synthesis", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="workers per device")
    parser.add_argument("--seed", type=int, default=1, help="arrivals: the seed of the kinds and intervals")
    parser.add_argument("--seeds", type=int, default=5, help="service-time draws the prediction is averaged over")
    parser.add_argument("--other-budgets", default="", help="e.g. 64MiB,128MiB: farms replayed besides the recorded one")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    runs = {"backlog": (backlog_run, 6), "arrivals": (arrivals_run, 40)}
    names = list(runs) if args.workload == "both" else [args.workload]
    table, others = [], []
    base_jobs = args.jobs
    for name in names:
        run, default_jobs = runs[name]
        args.jobs = base_jobs or default_jobs
        what = f" of {args.kind}" if name == "arrivals" else ""
        print(f"{name}: {args.jobs} jobs{what}, scale {args.scales.split(',')[0]}, devices {args.devices}, "
              f"{args.synthesis} synthesis, {args.workers} workers/device, budget {args.budget}", flush=True)
        since, until = run(args)
        table += compare(name, since, until, args)
        budgets = [parse_size(args.budget)] + [parse_size(b) for b in args.other_budgets.split(",") if b]
        others.append(f"{name}, {since:%H:%M:%S}–{until:%H:%M:%S} UTC, replayed on other farms:\n\n"
                      + farms(since, until, budgets))
    print()
    print(markdown_table(["workload", "device load", "figure", "measured s", "drawn: predicted s (mean)",
                          "drawn: range", "drawn: ratio", "own times: predicted s", "own times: ratio"],
                         table))
    for text in others:
        print()
        print(text)


if __name__ == "__main__":
    main()
