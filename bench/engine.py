"""Engine benchmark: how much of a bare loop's speed the engine keeps, and more.

    .venv/bin/python bench/engine.py                                # efficiency at tiny, small, medium
    .venv/bin/python bench/engine.py --scales medium --synthesis 1 --prover-cores 1
    .venv/bin/python bench/engine.py --split --scales tiny,small    # split proving on against off
    .venv/bin/python bench/engine.py --latency                      # submission → claim, woken or polling
    .venv/bin/python bench/engine.py --batch 1 4                    # batched proving against one by one

Efficiency (the default; issue 46), per scale, in one run: a porep-c2 job of 10 partitions
timed from its submission to its done on one engine with the engine's defaults (the keys and
the synthesis processes warm: a first job is proved untimed), against a bare loop that
synthesizes (``synthesize_partition``) and proves (``prove``) the same ten partitions one after
another in this process, on the same cores, warm too; the best of ``--repeat`` of each. Efficiency is the engine's partitions per
second over the loop's: above 1 where the engine overlaps synthesis with proving. Beside it:
the loop's mean synthesis of a partition (its kernels on every core), the same on one core
(this thread pinned: one kernel thread, as a synthesis process pinned to its core runs) over
new jobs' partitions, each job a sector whose tree its first partition builds, as in every job
the engine proves, and beside it the same partitions again with their trees built, the
synthesis the engine records per partition (synth_started_at to synth_finished_at) and its
ratio to the one-core figure (issue 45: at most 1.25, measured with one synthesis process and
the prover on one core: ``--synthesis 1 --prover-cores 1``; then the one-core figure is taken
after each timed job, on the synthesis process's core while the engine idles, and each job's
pair is printed below the row), what the synthesis processes
timed of the synthesis itself (warm-up job included), and the machine's load average, which on
a shared machine moves every figure.

--split: a backlog of porep-c2 jobs through one engine, split proving on against off:
proofs/min, the engine's own overhead per partition (the status writer's busy time), and
device busy (the workers' time inside the device's lock over the proving window).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
os.environ["PROVINGSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-engine-")
os.environ.setdefault("PROVINGSITE_PARAMS_DIR", str(REPO / ".cache" / "engine-test-params"))
os.environ.setdefault("LOG_LEVEL", "warning")
os.environ.setdefault("PROVINGSITE_DEV_KEYS", "1")  # keys for a scale are made once on first use

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db.models import Max, Min  # noqa: E402

from engine.circuits.kinds import validate_inputs  # noqa: E402
from engine.ledger.demo import demo_inputs  # noqa: E402
from engine.ledger.jobs import submit_job  # noqa: E402
from engine.models import Partition, ProofJob  # noqa: E402
from engine.pipeline.host import Engine, EngineConfig  # noqa: E402

PARTITIONS = 10  # a porep-c2 job's
JOB_TIMEOUT_S = 900.0  # a first job at a scale makes its keys


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


def run(scale: str, split: bool, jobs: int, args: argparse.Namespace, batch: int = 0) -> RunResult:
    tag = (f"{scale}-{'split' if split else 'nosplit'}" + (f"-batch{batch}" if batch > 1 else "")
           + (f"-s{args.synthesis}-p{args.pace}" if args.synthesis or args.pace else ""))
    ProofJob.objects.all().delete()
    backlog(scale, jobs, tag)
    config = EngineConfig.from_settings(scale=scale, split=split, devices=args.devices, budget=args.budget,
                                        synthesis=args.synthesis, workers_per_device=args.workers,
                                        host_name=f"bench-{tag}", batch_max=batch or args.batch_max,
                                        batch_wait_ms=args.batch_wait_ms, pace_ahead=args.pace)
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


class Efficiency(TypedDict):
    bare_s: float
    engine_s: float
    efficiency: float
    bare_synth_ms: float
    one_core_synth_ms: float
    tree_built_synth_ms: float
    beside_prover_synth_ms: float | None
    recorded_synth_ms: float
    in_process_synth_ms: float
    synthesis: int
    failed: int
    pairs_ms: list[tuple[float, float]]  # per timed job: (recorded, the bare one-core figure right after it)


def bare_loop(scale: str, partitions: int, device: str) -> tuple[float, float]:
    """Seconds for ``partitions`` porep-c2 partitions synthesized and proved one after another
    in this process (warm), and the mean synthesis of one, in seconds."""
    from engine.circuits.synthesis import synthesize_partition
    from engine.pipeline.keys import load_proving_key
    from engine.prover import gpu_prove_finish, gpu_prove_start

    circuit_id = f"porep-c2/{scale}"
    inputs, _ = validate_inputs("porep-c2", demo_inputs("porep-c2"))
    key = load_proving_key(circuit_id)
    gpu_prove_finish(gpu_prove_start(key, synthesize_partition(circuit_id, inputs, 0), device))  # warm
    synth = 0.0
    started = time.perf_counter()
    for index in range(partitions):
        t0 = time.perf_counter()
        assignment = synthesize_partition(circuit_id, inputs, index)
        synth += time.perf_counter() - t0
        gpu_prove_finish(gpu_prove_start(key, assignment, device))
        del assignment
    return time.perf_counter() - started, synth / partitions


def one_core_synthesis(scale: str, partitions: int, jobs: int, core: int | None = None) -> tuple[float, float]:
    """The mean of one partition's synthesis on one core (this thread pinned to ``core``, the
    lowest by default, so the kernels run one thread): the bare figure issue 45 sets the
    engine's recorded synthesis against (bench/synthesis.py's, one thread), in seconds. Timed
    over ``jobs`` new jobs' partitions, each a sector of its own as every job the engine proves
    is: its first partition builds the sector's tree (about 40 ms at medium), as the engine's
    does. Beside it, the same partitions again with their trees already built (the figure
    before this comparison was made like for like). Every partition is written into the same
    arrays, made once, as a synthesis process writes into the pool's kept blocks: arrays made
    anew each time cost their page faults (about 2.5 ms of a medium partition) whenever the
    allocator had handed their pages back, which made the figure swing by a third from one
    minute to the next."""
    import numpy as np

    from engine.circuits.synthesis import partition_rows, synthesize_partition_into

    circuit_id = f"porep-c2/{scale}"
    n_vars, n = partition_rows(circuit_id)
    out = [np.zeros((rows, 4), np.uint64) for rows in (n_vars, n, n, n)]
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores) if core is None else core})
    try:
        warm, _ = validate_inputs("porep-c2", demo_inputs("porep-c2"))
        synthesize_partition_into(circuit_id, warm, 0, *out)  # the code and the compiled circuit, not the timed sectors
        fresh = warm_tree = 0.0
        for _ in range(jobs):
            inputs, _ = validate_inputs("porep-c2", demo_inputs("porep-c2"))
            for tree_built in (False, True):
                started = time.perf_counter()
                for index in range(partitions):
                    synthesize_partition_into(circuit_id, inputs, index, *out)
                seconds = time.perf_counter() - started
                if tree_built:
                    warm_tree += seconds
                else:
                    fresh += seconds
        return fresh / (jobs * partitions), warm_tree / (jobs * partitions)
    finally:
        os.sched_setaffinity(0, cores)


def beside_prover(scale: str, partitions: int, jobs: int) -> float:
    """``one_core_synthesis``'s figure (new sectors) while a process proves the scale's
    partitions without a pause on the other cores, as the engine's prover does beside its
    synthesis process under ``--prover-cores``: what sharing the machine costs a synthesis."""
    import multiprocessing

    cores = sorted(os.sched_getaffinity(0))
    context = multiprocessing.get_context("spawn")
    proving, stop = context.Event(), context.Event()
    prover = context.Process(target=prove_beside, args=(scale, set(cores[1:]) or set(cores), proving, stop),
                             daemon=True)
    prover.start()
    try:
        if not proving.wait(JOB_TIMEOUT_S):
            raise SystemExit("the prover beside the synthesis never started: see its error above")
        return one_core_synthesis(scale, partitions, jobs)[0]
    finally:
        stop.set()
        prover.join(30)


def prove_beside(scale: str, cores: set[int], proving: Any, stop: Any) -> None:
    """In a process of its own, on ``cores``: prove one partition of ``scale`` over and over."""
    os.sched_setaffinity(0, cores)
    from engine.circuits.synthesis import synthesize_partition
    from engine.pipeline.keys import load_proving_key
    from engine.prover import gpu_prove_finish, gpu_prove_start

    circuit_id = f"porep-c2/{scale}"
    inputs, _ = validate_inputs("porep-c2", demo_inputs("porep-c2"))
    key = load_proving_key(circuit_id)
    assignment = synthesize_partition(circuit_id, inputs, 0)
    gpu_prove_finish(gpu_prove_start(key, assignment, "cpu"))
    proving.set()
    while not stop.is_set():
        gpu_prove_finish(gpu_prove_start(key, assignment, "cpu"))


class EngineJobs(NamedTuple):
    best_s: float  # submission to done, the best job
    recorded_s: list[float]  # per timed job: the mean synthesis it recorded per partition
    paired_s: list[float]  # per timed job: the bare one-core figure taken right after it (with --prover-cores)
    synthesis: int  # the engine's synthesis processes
    failed: int  # partitions not done
    in_process_ms: float  # what its synthesis processes measured of the synthesis (warm-up job included)


def engine_job(scale: str, args: argparse.Namespace) -> EngineJobs:
    """``args.repeat`` porep-c2 jobs, one at a time, through a warm engine with its defaults
    (what the command line overrides aside). With ``--prover-cores`` each timed job is followed,
    the engine idle, by the bare one-core synthesis of a new job's partitions on the core the
    synthesis process runs on: each recorded figure has its bare figure from the same minute on
    the same core (a shared machine's speed drifts between a run's phases)."""
    ProofJob.objects.all().delete()
    config = EngineConfig.from_settings(scale=scale, devices=args.devices, budget=args.budget,
                                        synthesis=args.synthesis, workers_per_device=args.workers,
                                        batch_max=args.batch_max, pace_ahead=args.pace,
                                        host_name=f"bench-efficiency-{scale}")
    engine = Engine(config).start()
    try:
        synthesis_core = pin(engine, args.prover_cores) if args.prover_cores else None
        job_for(engine, scale, "warm")  # keys loaded, every synthesis process holding the circuit
        best, recorded, paired, failed = float("inf"), [], [], 0
        for n in range(args.repeat):
            job = job_for(engine, scale, f"timed-{n}")
            assert job.finished_at is not None
            best = min(best, (job.finished_at - job.submitted_at).total_seconds())
            parts = list(Partition.objects.filter(job=job))
            synth = [(p.synth_finished_at - p.synth_started_at).total_seconds() for p in parts
                     if p.synth_finished_at and p.synth_started_at]
            recorded.append(sum(synth) / max(len(synth), 1))
            failed += sum(p.state != "done" for p in parts)
            if synthesis_core is not None:
                paired.append(one_core_synthesis(scale, PARTITIONS, 1, synthesis_core)[0])
        return EngineJobs(best, recorded, paired, engine.config.synthesis, failed, engine.stats.mean_ms("synth_s"))
    finally:
        engine.stop(drain_seconds=10)


def job_for(engine: Engine, scale: str, tag: str) -> ProofJob:
    """A porep-c2 job (10 partitions) submitted and waited for."""
    inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
    job, _ = submit_job(kind="porep-c2", job_id=f"bench-efficiency-{scale}-{tag}", inputs=inputs, num_partitions=n,
                        circuit_id=f"porep-c2/{scale}", scale=scale)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not ProofJob.objects.filter(pk=job.pk, state__in=("done", "failed", "cancelled")).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{job.job_id} not finished within {JOB_TIMEOUT_S:.0f} s: see the engine's log")
        # The figure comes from the job's records, not from this loop, so the poll can be
        # coarse: it runs in the engine's process, under the same GIL, and at 50 ms its ORM
        # queries held the GIL for a tenth of the engine's own Python time at tiny (py-spy --gil).
        time.sleep(0.25)
    job.refresh_from_db()
    return job


def pin(engine: Engine, prover_cores: int) -> int:
    """The engine's process (its proving threads) on the first ``prover_cores`` cores, its
    synthesis processes on the others (issue 45's comparison: the prover on one core); the
    first of those others."""
    cores = sorted(os.sched_getaffinity(0))
    mine, rest = set(cores[:prover_cores]), set(cores[prover_cores:]) or set(cores)
    # Linux sets affinity per thread: every thread of each process, the ones already running
    # (workers, finalizers, OpenMP's pool) included; threads started later inherit it.
    for pid, where in ((os.getpid(), mine), *((pid, rest) for pid in engine.synthesis.pids())):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), where)
    return min(rest)


def efficiency(scale: str, args: argparse.Namespace) -> Efficiency:
    device = "cpu" if args.devices in ("auto", "cpu") else args.devices.split(",")[0]
    if args.devices == "auto":
        from engine.pipeline.devices import discover

        device = discover("auto")[0].name
    all_cores = os.sched_getaffinity(0)
    try:
        jobs = engine_job(scale, args)
    finally:
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), all_cores)
    runs = [bare_loop(scale, PARTITIONS, device) for _ in range(args.repeat)]
    bare_s, bare_synth = min(r[0] for r in runs), sum(r[1] for r in runs) / len(runs)
    one_core, tree_built = one_core_synthesis(scale, PARTITIONS, args.repeat)
    if jobs.paired_s:  # taken beside each engine job: the figure the recorded one is set against
        one_core = sum(jobs.paired_s) / len(jobs.paired_s)
    beside = beside_prover(scale, PARTITIONS, args.repeat) if args.beside_prover else None
    recorded = sum(jobs.recorded_s) / len(jobs.recorded_s)
    return {"bare_s": bare_s, "engine_s": jobs.best_s, "efficiency": bare_s / jobs.best_s if jobs.best_s else 0.0,
            "bare_synth_ms": 1000 * bare_synth, "one_core_synth_ms": 1000 * one_core,
            "tree_built_synth_ms": 1000 * tree_built, "recorded_synth_ms": 1000 * recorded,
            "synthesis": jobs.synthesis, "beside_prover_synth_ms": 1000 * beside if beside is not None else None,
            "failed": jobs.failed, "in_process_synth_ms": jobs.in_process_ms,
            "pairs_ms": [(1000 * r, 1000 * b) for r, b in zip(jobs.recorded_s, jobs.paired_s, strict=False)]}


def efficiency_table(args: argparse.Namespace) -> None:
    print(f"porep-c2, {PARTITIONS} partitions, engine ({args.devices}) with its defaults"
          f"{' but ' + overrides(args) if overrides(args) else ''} against a bare loop in one process; "
          f"{len(os.sched_getaffinity(0))} cores")
    print(f"{'scale':7} {'bare s':>7} {'engine s':>8} {'efficiency':>10} {'synth procs':>11} {'bare synth ms':>13} "
          f"{'1-core synth ms':>15} {'(tree built)':>12} {'(beside prover)':>15} {'recorded synth ms':>17} {'ratio':>6} "
          f"{'in process ms':>13} {'load avg (1 min)':>16}")
    for scale in args.scales.split(","):
        load = os.getloadavg()[0]
        r = efficiency(scale, args)
        print(f"{scale:7} {r['bare_s']:>7.2f} {r['engine_s']:>8.2f} {r['efficiency']:>10.2f} {r['synthesis']:>11} "
              f"{r['bare_synth_ms']:>13.0f} {r['one_core_synth_ms']:>15.1f} {r['tree_built_synth_ms']:>12.1f} "
              f"{_ms(r['beside_prover_synth_ms']):>15} "
              f"{r['recorded_synth_ms']:>17.1f} {r['recorded_synth_ms'] / max(r['one_core_synth_ms'], 1e-9):>6.2f} "
              f"{r['in_process_synth_ms']:>13.0f} "
              f"{load:>7.2f} → {os.getloadavg()[0]:<6.2f}{'  FAILED ' + str(r['failed']) if r['failed'] else ''}",
              flush=True)
        if r["pairs_ms"]:
            print(f"  {scale} per job, recorded / bare one-core right after it (ms): "
                  + ", ".join(f"{rec:.1f} / {bare:.1f} = {rec / max(bare, 1e-9):.2f}" for rec, bare in r["pairs_ms"]),
                  flush=True)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def overrides(args: argparse.Namespace) -> str:
    said = [f"--{name.replace('_', '-')} {value}" for name, value in (
        ("synthesis", args.synthesis), ("workers", args.workers), ("batch_max", args.batch_max),
        ("pace", args.pace), ("prover_cores", args.prover_cores)) if value]
    return ", ".join(said)


def latency(wake: bool, jobs: int, args: argparse.Namespace) -> dict[str, float]:
    """Submission → claim and → done (ms, p50 and p95) of winning-post jobs sent one at a time to
    an idle, warm engine at scale tiny; ``wake`` off is the claim loop's idle poll alone."""
    import statistics

    ProofJob.objects.all().delete()
    config = EngineConfig.from_settings(scale="tiny", devices=args.devices, budget=args.budget, synthesis=1,
                                        workers_per_device=1, host_name=f"bench-latency-{wake}", cpu_max_domain=0,
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
    parser.add_argument("--scales", default="tiny,small,medium")
    parser.add_argument("--jobs", type=int, default=3, help="--split and --batch: porep-c2 jobs (10 partitions each) per run")
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--budget", default="8GiB")
    parser.add_argument("--synthesis", type=int, default=0, help="synthesis processes (0: the engine's default)")
    parser.add_argument("--workers", type=int, default=0, help="workers per device (0: the engine's default)")
    parser.add_argument("--batch-max", type=int, default=0, help="partitions per launch (0: the engine's default)")
    parser.add_argument("--pace", type=int, default=0, help="synthesized partitions kept waiting per device "
                                                            "(0: the engine's default)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="timed jobs through the engine and rounds of the bare loop; the best of each is compared "
                             "(a shared machine's load comes and goes)")
    parser.add_argument("--beside-prover", action="store_true",
                        help="efficiency: also time the one-core synthesis while a process proves on the other cores")
    parser.add_argument("--prover-cores", type=int, default=0,
                        help="the engine's process on this many cores, its synthesis processes on the rest")
    parser.add_argument("--split", action="store_true", help="split proving on against off instead")
    parser.add_argument("--latency", action="store_true", help="submission → claim latency instead")
    parser.add_argument("--latency-jobs", type=int, default=20, help="winning-post jobs for --latency")
    parser.add_argument("--batch", type=int, nargs="+", default=None, metavar="K",
                        help="batched proving instead: one split run per batch size (1 = off, the reference), "
                             "proofs/min and the ratio against off, e.g. --batch 1 2 4 8")
    parser.add_argument("--batch-wait-ms", type=float, default=50.0, help="PROVINGSITE_BATCH_WAIT_MS for --batch")
    parser.add_argument("--sweep", action="store_true",
                        help="a backlog through the engine for every combination of --sweep-synthesis, --sweep-pace "
                             "and --sweep-batch (split on): proofs/min, and each run's proving window for "
                             "bench/gpu_util.py")
    parser.add_argument("--sweep-synthesis", default="0", help="synthesis processes to sweep (0: the default)")
    parser.add_argument("--sweep-pace", default="0", help="synthesized partitions waiting per device to sweep")
    parser.add_argument("--sweep-batch", default="0", help="batch sizes to sweep")
    args = parser.parse_args()
    args.workers = args.workers or None  # the engine's default
    call_command("migrate", verbosity=0)
    if args.latency:
        from django.db import connection

        print(f"submission → claim, one warm winning-post/tiny at a time ({connection.vendor}, "
              f"{args.latency_jobs} jobs): claim loop polling alone vs woken by new work")
        off, on = latency(False, args.latency_jobs, args), latency(True, args.latency_jobs, args)
        for name, ms in (("poll only", off), ("woken", on)):
            print(f"  {name:9} claim p50 {ms['claim_p50']:6.1f} ms  p95 {ms['claim_p95']:6.1f} ms   "
                  f"done p50 {ms['done_p50']:6.1f} ms  p95 {ms['done_p95']:6.1f} ms")
        print(f"  claim p50 ratio poll/woken: {off['claim_p50'] / max(on['claim_p50'], 1e-3):.1f}x", flush=True)
        return
    if args.batch:
        batch_runs(args)
        return
    if args.sweep:
        sweep(args)
        return
    if not args.split:
        efficiency_table(args)
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


def sweep(args: argparse.Namespace) -> None:
    """Synthesis processes × pacing × batching, split proving on: proofs/min per combination, and
    its proving window ("gpu window <label> split on: start end") for the device's own busy
    figure (bench/gpu_util.py over nvidia-smi's samples)."""
    import itertools

    numbers = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    print(f"{'scale':6} {'synthesis':>9} {'pace':>4} {'batch':>5} {'parts':>5} {'wall s':>7} {'proofs/min':>10} "
          f"{'synth ms':>8} {'gpu ms':>7} {'workers in lock':>15}")
    for scale in args.scales.split(","):
        for synthesis, pace, batch in itertools.product(numbers(args.sweep_synthesis), numbers(args.sweep_pace),
                                                        numbers(args.sweep_batch)):
            args.synthesis, args.pace = synthesis, pace
            r = run(scale, True, args.jobs, args, batch=batch)
            label = f"{scale}/s{synthesis or 'auto'}/p{pace or 'auto'}/b{batch or 'auto'}"
            print(f"{scale:6} {synthesis or 'auto':>9} {pace or 'auto':>4} {batch or 'auto':>5} {r['partitions']:>5} "
                  f"{r['wall_s']:>7.1f} {r['proofs_per_min']:>10.1f} {r['synth_ms']:>8.0f} {r['gpu_ms']:>7.0f} "
                  f"{r['device_busy']:>15.3f}{'  FAILED ' + str(r['failed']) if r['failed'] else ''}", flush=True)
            if r["gpu_window"]:
                print(f"  gpu window {label} split on: {r['gpu_window'][0]} {r['gpu_window'][1]}", flush=True)


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
