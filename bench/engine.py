"""Engine benchmark: a backlog through the whole pipeline, split proving on vs off.

    .venv/bin/python bench/engine.py                          # tiny and small, CPU or GPU as found
    .venv/bin/python bench/engine.py --scales tiny --jobs 6 --devices cpu
    DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/engine.py --latency-only

First, submission → claim latency: warm winning-post jobs one at a time to an idle engine,
with the claim loop woken by new work (engine.ledger.new_work) and, as the reference in the
same run, polling alone.

Then per (scale, split) run, on a fresh SQLite database: a backlog of porep-c2 jobs (10
partitions each) is submitted first, then one engine proves it all. Reported:

* proofs/min — partitions proved per minute of wall time (first claim → last done);
* engine overhead per partition — time the engine spends on its own work (claiming,
  recording transitions, fencing, hints: the status writer's busy time) per partition;
* device busy — fraction of the proving window (first gpu start → last gpu end) in which
  the device was inside the prover; and each worker's own fraction. Split proving should
  keep the device ≥ 0.95 busy while synthesized work waits; without it the device also
  waits for the CPU-side finishing work.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
os.environ["PROVINGSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-engine-")
os.environ.setdefault("PROVINGSITE_PARAMS_DIR", str(REPO / ".cache" / "engine-test-params"))
os.environ.setdefault("LOG_LEVEL", "warning")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db.models import Max, Min  # noqa: E402

from engine.circuits.kinds import validate_inputs  # noqa: E402
from engine.ledger.demo import demo_inputs  # noqa: E402
from engine.ledger.jobs import submit_job  # noqa: E402
from engine.models import Partition, ProofJob  # noqa: E402
from engine.pipeline.host import Engine, EngineConfig  # noqa: E402


def backlog(scale: str, jobs: int, tag: str) -> None:
    for i in range(jobs):
        inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
        submit_job(kind="porep-c2", job_id=f"bench-{tag}-{i}", inputs=inputs, num_partitions=n,
                   circuit_id=f"porep-c2/{scale}", scale=scale)


class RunResult(TypedDict):
    partitions: int
    wall_s: float
    proofs_per_min: float
    overhead_ms: float
    synth_ms: float
    gpu_ms: float
    finish_ms: float
    device_busy: float
    worker_busy: list[float]
    failed: int
    gpu_window: tuple[str, str] | None


def run(scale: str, split: bool, jobs: int, args: argparse.Namespace, batch: int = 1) -> RunResult:
    tag = f"{scale}-{'split' if split else 'nosplit'}" + (f"-batch{batch}" if batch > 1 else "")
    ProofJob.objects.all().delete()
    backlog(scale, jobs, tag)
    config = EngineConfig.from_settings(scale=scale, split=split, devices=args.devices, budget=args.budget,
                                        synthesis=args.synthesis, workers_per_device=args.workers,
                                        host_name=f"bench-{tag}", batch_max=batch,
                                        batch_wait_ms=args.batch_wait_ms)
    engine = Engine(config)
    # Keys loaded before the clock starts: a one-time cost, not the steady state measured.
    from engine.circuits.kinds import circuit_for

    engine.keycache.checkout(f"porep-c2/{scale}", circuit_for("porep-c2", scale).memory.key_bytes)
    engine.keycache.check_in(f"porep-c2/{scale}")
    engine.start()
    engine.run_until_idle(poll=0.05)
    engine.stop(drain_seconds=10)
    parts = Partition.objects.filter(job__job_id__startswith=f"bench-{tag}-", state="done")
    n = parts.count()
    span = parts.aggregate(a=Min("claimed_at"), b=Max("finished_at"))
    wall = (span["b"] - span["a"]).total_seconds()
    gpu = parts.aggregate(a=Min("gpu_started_at"), b=Max("gpu_finished_at"))
    window = (gpu["b"] - gpu["a"]).total_seconds()
    busy = sum(w.busy_s for w in engine.workers)
    devices = max(len(engine.devices), 1)
    return {
        "partitions": n, "wall_s": wall, "proofs_per_min": 60 * n / wall if wall else 0.0,
        "overhead_ms": 1000 * engine.writer.busy_s / n if n else 0.0,
        "synth_ms": engine.stats.mean_ms("synth_s"),
        "gpu_ms": engine.stats.mean_ms("gpu_s"),
        "finish_ms": engine.stats.mean_ms("finish_s"),
        "device_busy": busy / (window * devices) if window else 0.0,
        "worker_busy": [round(w.busy_s / window, 3) if window else 0.0 for w in engine.workers],
        "failed": ProofJob.objects.filter(state="failed").count(),
        "gpu_window": (gpu["a"].isoformat(), gpu["b"].isoformat()) if window else None,
    }


def latency(wake: bool, jobs: int, args: argparse.Namespace) -> dict[str, float]:
    """Submission → claim and → done (ms, p50 and p95) of winning-post jobs sent one at a time to
    an idle, warm engine at scale tiny; ``wake`` off is the claim loop's idle poll alone."""
    import statistics

    ProofJob.objects.all().delete()
    config = EngineConfig.from_settings(scale="tiny", devices=args.devices, budget=args.budget, synthesis=1,
                                        workers_per_device=1, host_name=f"bench-latency-{wake}",
                                        wake_on_new_work=wake)
    engine = Engine(config).start()
    claim_ms, done_ms = [], []
    try:
        for i in range(jobs + 1):  # the first warms the key, the synthesis process and the caches
            inputs, n = validate_inputs("winning-post", demo_inputs("winning-post"))
            job, _ = submit_job(kind="winning-post", job_id=f"bench-latency-{wake}-{i}", inputs=inputs,
                                num_partitions=n, circuit_id="winning-post/tiny", scale="tiny")
            while not ProofJob.objects.filter(pk=job.pk, state__in=("done", "failed")).exists():
                time.sleep(0.002)
            job.refresh_from_db()
            assert job.finished_at is not None  # done or failed: waited for above
            claimed = Partition.objects.filter(job=job).aggregate(a=Min("claimed_at"))["a"]
            if i:
                claim_ms.append(1000 * (claimed - job.submitted_at).total_seconds())
                done_ms.append(1000 * (job.finished_at - job.submitted_at).total_seconds())
            time.sleep(0.05 + 0.1 * (i % 3) / 3)  # land at different points of the idle poll
    finally:
        engine.stop(drain_seconds=5)

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]

    return {"claim_p50": statistics.median(claim_ms), "claim_p95": pct(claim_ms, 95),
            "done_p50": statistics.median(done_ms), "done_p95": pct(done_ms, 95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="tiny,small")
    parser.add_argument("--jobs", type=int, default=3, help="porep-c2 jobs (10 partitions each) per run")
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--budget", default="4GiB")
    parser.add_argument("--synthesis", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="workers per device")
    parser.add_argument("--latency-jobs", type=int, default=20,
                        help="winning-post jobs for the submission-to-claim latency (0: skip)")
    parser.add_argument("--latency-only", action="store_true", help="only the latency comparison")
    parser.add_argument("--batch", type=int, nargs="+", default=None, metavar="K",
                        help="batched proving instead: one split run per batch size (1 = off, the reference), "
                             "proofs/min and the ratio against off, e.g. --batch 1 2 4 8")
    parser.add_argument("--batch-wait-ms", type=float, default=50.0, help="PROVINGSITE_BATCH_WAIT_MS for --batch")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.latency_jobs:
        from django.db import connection

        print(f"submission → claim, one warm winning-post/tiny at a time ({connection.vendor}, "
              f"{args.latency_jobs} jobs): claim loop polling alone vs woken by new work")
        off, on = latency(False, args.latency_jobs, args), latency(True, args.latency_jobs, args)
        for name, ms in (("poll only", off), ("woken", on)):
            print(f"  {name:9} claim p50 {ms['claim_p50']:6.1f} ms  p95 {ms['claim_p95']:6.1f} ms   "
                  f"done p50 {ms['done_p50']:6.1f} ms  p95 {ms['done_p95']:6.1f} ms")
        print(f"  claim p50 ratio poll/woken: {off['claim_p50'] / max(on['claim_p50'], 1e-3):.1f}x", flush=True)
    if args.latency_only:
        return
    if args.batch:
        batch_runs(args)
        return
    print(f"{'scale':6} {'split':5} {'parts':>5} {'wall s':>7} {'proofs/min':>10} {'overhead ms':>11} "
          f"{'synth ms':>8} {'gpu ms':>7} {'finish ms':>9} {'device busy':>11}  worker busy")
    for scale in args.scales.split(","):
        for split in (True, False):
            t0 = time.perf_counter()
            r = run(scale, split, args.jobs, args)
            print(f"{scale:6} {'on' if split else 'off':5} {r['partitions']:>5} {r['wall_s']:>7.1f} "
                  f"{r['proofs_per_min']:>10.1f} {r['overhead_ms']:>11.1f} {r['synth_ms']:>8.0f} {r['gpu_ms']:>7.0f} "
                  f"{r['finish_ms']:>9.0f} {r['device_busy']:>11.3f}  {r['worker_busy']}"
                  f"{'  FAILED ' + str(r['failed']) if r['failed'] else ''}  ({time.perf_counter() - t0:.0f}s)",
                  flush=True)
            if r["gpu_window"]:  # for lining up with an outside sampler of the device (gpu_check.sh)
                print(f"  gpu window {scale} split {'on' if split else 'off'}: {r['gpu_window'][0]} {r['gpu_window'][1]}")


def batch_runs(args: argparse.Namespace) -> None:
    """Batching off (1) and on at each size, same process, split proving; ratios against off."""
    sizes = sorted(set(args.batch) | {1})
    print(f"{'scale':6} {'batch':>5} {'parts':>5} {'wall s':>7} {'proofs/min':>10} {'vs off':>6} {'gpu ms':>7} "
          f"{'device busy':>11}")
    for scale in args.scales.split(","):
        off = 0.0
        for k in sizes:
            r = run(scale, True, args.jobs, args, batch=k)
            off = off or r["proofs_per_min"]
            print(f"{scale:6} {k if k > 1 else 'off':>5} {r['partitions']:>5} {r['wall_s']:>7.1f} "
                  f"{r['proofs_per_min']:>10.1f} {r['proofs_per_min'] / off if off else 0.0:>6.2f} {r['gpu_ms']:>7.0f} "
                  f"{r['device_busy']:>11.3f}{'  FAILED ' + str(r['failed']) if r['failed'] else ''}", flush=True)


if __name__ == "__main__":
    main()
