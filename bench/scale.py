"""A production-size job through a real engine, with the budget set to what 2 partitions need:
the engine process tree's peak RSS against the budget, the reservation estimate against the
measured peak of one partition, and the key's load time per residency tier.

    .venv/bin/python bench/scale.py                                   # porep-c2/large
    .venv/bin/python bench/scale.py --circuit porep-c2/medium --markdown /tmp/scale-medium.md

Steps, each printing progress as it goes:

1. the key: made in the params directory (--params-dir, default --data-dir/params) if missing, as ``setupkeys`` does,
   and timed;
2. the engine's own figures: its processes at rest (a probe engine, budget auto, logs what it
   reserves for them), what the key is charged (points, matrices, fixed-base tables), each
   synthesis process's compiled matrices and what one partition reserves (witness, a/b/c, the
   prover's working arrays; engine.circuits.sizing via the circuit's shape); the budget is
   rest + key + --synthesis × compiled + --concurrent partitions (an explicit
   PROVINGSITE_MEMORY_BUDGET is used as given: the safety margin applies only to ``auto``);
3. ``manage.py runengine`` as a subprocess on a fresh SQLite database, its process tree's RSS
   (the engine and its synthesis processes) sampled every --sample-ms. The key is preloaded hot
   through the operators' key control first, so the tree's RSS with the key and no partition is
   the baseline (with --cold-matrices the circuit's compiled matrices are first removed from
   the cache, so each run's synthesis processes meet a circuit this host never compiled). Two runs: *solo* (budget rest + key + compiled + 1 partition: partitions one at a time, stopped
   after --solo-partitions are done) gives one partition's measured peak above the baseline;
   *concurrent* (the budget above) proves a whole job, which must end ``done`` with every proof
   verified by the engine;
4. the key per tier (bench.key_tiers.measure): cold → hot (read + fixed-base tables), hot → warm
   (write the image, map it), and a proof with the hot key and with the warm one.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

GiB = 1 << 30


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if abs(n) >= GiB else f"{n / (1 << 20):.0f} MiB"


# -- sampling the engine's process tree ------------------------------------------------------


@dataclass
class Sample:
    at: float  # time.time()
    tree: int  # RSS of the engine and every descendant
    engine: int  # the engine process alone
    pool: int  # its descendants: the synthesis processes


@dataclass
class TreeSampler:
    """RSS of a process and its descendants every ``interval`` seconds, on a thread."""

    pid: int
    interval: float
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self._stop.wait(self.interval):
            try:
                engine = root.memory_info().rss
                tree = engine
                for child in root.children(recursive=True):
                    try:
                        tree += child.memory_info().rss
                    except psutil.NoSuchProcess:  # a child ended between listing and reading
                        pass
            except psutil.NoSuchProcess:
                return
            self.samples.append(Sample(time.time(), tree, engine, tree - engine))

    def peak(self, since: float = 0.0, until: float = float("inf"), of: str = "tree") -> int:
        return max((getattr(s, of) for s in self.samples if since <= s.at <= until), default=0)

    def median(self, since: float, until: float, of: str = "tree") -> int:
        import statistics

        values = [getattr(s, of) for s in self.samples if since <= s.at <= until]
        return int(statistics.median(values)) if values else 0

    def settle(self, limit: float = 60.0, window: float = 1.0, slack: int = 4 << 20) -> None:
        """Wait until the tree's RSS holds still (the synthesis processes import Django and the
        engine's modules after the engine has registered): two windows within ``slack``."""
        deadline = time.monotonic() + limit
        time.sleep(2 * window)
        while time.monotonic() < deadline:
            now = time.time()
            if abs(self.median(now - window, now) - self.median(now - 2 * window, now - window)) <= slack:
                return
            time.sleep(window / 2)

    def rest(self, seconds: float) -> dict[str, int]:
        """The median of the last ``seconds`` of samples, per part: the tree at rest."""
        time.sleep(seconds)  # an idle window to sample
        now = time.time()
        return {of: self.median(now - seconds, now, of) for of in ("tree", "engine", "pool")}


# -- the pieces ------------------------------------------------------------------------------


def ensure_key(circuit_id: str) -> tuple[float | None, int]:
    """The key in the params directory: (setup seconds, or None when present; zkey bytes)."""
    from django.conf import settings

    from engine.circuits.keystore import KeyStore
    from engine.circuits.kinds import parse_circuit_id
    from engine.ledger.keys import adopt_key
    from engine.prover.formats.snarkjs_json import vk_digest

    shape = parse_circuit_id(circuit_id)
    keys = KeyStore(settings.PROVINGSITE["PARAMS_DIR"])
    took = None
    if keys.keys_present(shape):
        say(f"key {circuit_id}: present in {keys.params_dir}")
    else:
        say(f"key {circuit_id}: {shape.n_constraints:,} constraints, domain 2^{shape.domain_size.bit_length() - 1}; "
            f"setting up (2^20 takes minutes)…")
        started = time.perf_counter()
        keys.ensure_keys(shape, force=True)
        took = time.perf_counter() - started
        say(f"key {circuit_id}: set up in {took:.1f} s")
    adopt_key(circuit_id, vk_digest(keys.load_verifying_key(circuit_id)), "bench/scale.py", replace=True)
    return took, keys.proving_key_path(circuit_id).stat().st_size


@dataclass
class Estimates:
    key_bytes: int  # what the key cache charges at checkout: points + fixed-base tables
    partition_bytes: int  # what one partition reserves: witness + a/b/c + the prover's working arrays
    witness_bytes: int
    abc_bytes: int
    work_bytes: int
    rest_bytes: int = 0  # the engine's processes at rest, as the engine measures and reserves them
    compiled_bytes: int = 0  # the synthesis processes' compiled matrices, all of them


def compiled_estimate(circuit_id: str) -> int:
    from engine.circuits.kinds import parse_circuit_id

    return parse_circuit_id(circuit_id).compiled_bytes


def engine_rest(args: argparse.Namespace, env: dict[str, str]) -> int:
    """What the engine reserves for its processes at rest: a probe engine (budget auto) is
    started on its own database until it logs the figure."""
    import re

    probe_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=env["PROVINGSITE_DATA_DIR"]))
    probe_env = {**env, "PROVINGSITE_DATA_DIR": str(probe_dir)}
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "-v0"], env=probe_env, cwd=REPO, check=True)
    log_path = probe_dir / "engine-probe.log"
    cmd = [sys.executable, str(REPO / "manage.py"), "runengine", "--budget", "auto", "--devices", args.devices,
           "--synthesis", str(args.synthesis), "--host-name", "scale-probe", "--drain-seconds", "0"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=probe_env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"engine processes at rest .*\((\d+) bytes\) reserved", log_path.read_text())
            if found:
                say(f"probe engine: its processes at rest reserve {gib(int(found.group(1)))}")
                return int(found.group(1))
            time.sleep(0.5)
        raise SystemExit(f"the probe engine logged no rest figure: see {log_path}")
    finally:
        proc.terminate()
        proc.wait(60)


def estimates(circuit_id: str) -> Estimates:
    """The engine's own figures, as engine.pipeline.work sets them on a work item."""
    from engine.circuits.kinds import parse_circuit_id
    from engine.pipeline import keys

    needs = parse_circuit_id(circuit_id).memory
    return Estimates(key_bytes=int(needs.key_bytes + keys.table_bytes(needs)),
                     partition_bytes=int(needs.partition_bytes), witness_bytes=int(needs.witness_bytes),
                     abc_bytes=int(needs.abc_bytes), work_bytes=int(needs.work_bytes))


@dataclass
class EngineRun:
    name: str
    budget: int
    idle: dict[str, int] = field(default_factory=dict)  # at rest before the key: interpreters, the pool
    load_peak: int = 0  # the tree's peak while the key loads
    rested: dict[str, int] = field(default_factory=dict)  # at rest with the key hot, before the job
    after: dict[str, int] = field(default_factory=dict)  # at rest after the job (the pool keeps its matrices)
    peak_pool: int = 0
    baseline: int = 0  # tree RSS with the key hot and no partition
    preload_s: float = 0.0  # the preload request, asked → done (the engine's cold → hot)
    engine_load_s: float | None = None  # the engine's own record of the load
    held_key_bytes: int = 0  # what the engine's key cache charges once loaded
    peak: int = 0
    peak_engine: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    job_state: str = ""
    rest_reserved: int = 0  # --second-job: the engine processes' reservation before it (re-measured when idle)
    second_peak: int = 0  # --second-job: the tree's peak while it ran
    second_state: str = ""
    verified: int = 0
    wall_s: float = 0.0
    max_concurrent: int = 0


def run_engine(name: str, circuit_id: str, budget: int, args: argparse.Namespace, env: dict[str, str],
               stop_after: int | None) -> EngineRun:
    """One engine on a fresh database: preload the key, baseline, one job, sample to the end."""
    from django.db import connection

    from engine.circuits.kinds import parse_circuit_id
    from engine.ledger.key_requests import ask
    from engine.models import EngineHost, KeyRequest, Partition

    shape = parse_circuit_id(circuit_id)
    result = EngineRun(name, budget)
    host = f"scale-{name}"
    log_path = Path(env["PROVINGSITE_DATA_DIR"]) / f"engine-{name}.log"
    cmd = [sys.executable, str(REPO / "manage.py"), "runengine", "--budget", str(budget), "--scale", shape.scale,
           "--devices", args.devices, "--synthesis", str(args.synthesis), "--host-name", host,
           "--drain-seconds", "30"]
    if args.cold_matrices:
        from engine.circuits import compiled

        matrices = compiled._cache_path(shape)
        if matrices is not None:
            matrices.unlink(missing_ok=True)
            say(f"{name}: removed {matrices.name} from the matrices cache: the engine compiles the circuit")
    say(f"{name}: starting the engine, budget {gib(budget)} ({budget} bytes), log {log_path}")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    sampler = TreeSampler(proc.pid, args.sample_ms / 1000).start()
    first_end = float("inf")
    try:
        wait_for(lambda: EngineHost.objects.filter(name=host, stopped_at__isnull=True).exists(), proc, 120,
                 "the engine to register")
        sampler.settle()
        result.idle = sampler.rest(args.baseline_s)
        say(f"{name}: at rest without a key: tree {gib(result.idle['tree'])} (engine {gib(result.idle['engine'])}, "
            f"synthesis pool {gib(result.idle['pool'])})")
        started = time.perf_counter()
        loading_since = time.time()
        (request,) = ask(circuit_id, "preload", "hot", host, requested_by="bench/scale.py")
        say(f"{name}: preloading {circuit_id} hot on {host}…")
        wait_for(lambda: KeyRequest.objects.filter(pk=request.pk).exclude(state=KeyRequest.State.PENDING).exists(),
                 proc, 3600, "the preload")
        request.refresh_from_db()
        result.preload_s = time.perf_counter() - started
        result.load_peak = sampler.peak(loading_since)
        if request.state != KeyRequest.State.DONE:
            raise SystemExit(f"{name}: preload {request.state}: {request.reason}")
        held = resident_key(host, circuit_id)
        result.engine_load_s, result.held_key_bytes = held.get("load_seconds"), int(held.get("bytes") or 0)
        load = f"{result.engine_load_s:.1f} s" if result.engine_load_s is not None else "?"
        say(f"{name}: key hot after {result.preload_s:.1f} s (engine's load {load}), charged "
            f"{gib(result.held_key_bytes)}")
        result.rested = sampler.rest(args.baseline_s)
        result.baseline = result.rested["tree"]
        say(f"{name}: at rest with the key hot (the baseline): tree {gib(result.baseline)} (engine "
            f"{gib(result.rested['engine'])}, synthesis pool {gib(result.rested['pool'])}); peak while loading "
            f"{gib(result.load_peak)}")

        job, result.wall_s = prove_job(name, shape, proc, sampler, log_path, stop_after)
        result.after = sampler.rest(args.baseline_s)
        say(f"{name}: at rest after the job: tree {gib(result.after['tree'])} (engine {gib(result.after['engine'])}, "
            f"synthesis pool {gib(result.after['pool'])})")
        first_end = time.time()
        if args.second_job and stop_after is None:
            # the engine re-measures its processes at rest when idle (a heartbeat or two)
            time.sleep(3 * float(os.environ.get("PROVINGSITE_HEARTBEAT_SECONDS", "2")))
            result.rest_reserved = engine_reserved_now(host).get("engine processes", 0)
            since = time.time()
            second, _ = prove_job(f"{name} (second job)", shape, proc, sampler, log_path, None)
            second.refresh_from_db()
            result.second_peak, result.second_state = sampler.peak(since), second.state
            say(f"{name}: second job {second.state}, peak tree {gib(result.second_peak)}; engine processes reserved "
                f"{gib(result.rest_reserved)} before it")
    finally:
        say(f"{name}: stopping the engine")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sampler.stop()
    connection.close()
    job.refresh_from_db()
    result.job_state = job.state
    result.peak = sampler.peak(until=first_end)  # the first job's (a second one's is second_peak)
    result.peak_engine = sampler.peak(until=first_end, of="engine")
    result.peak_pool = sampler.peak(until=first_end, of="pool")
    for p in Partition.objects.filter(job=job).order_by("index"):
        row: dict[str, Any] = {"index": p.index, "state": p.state, "verified": bool(p.vk_digest), "batch": p.batch}
        if p.synth_started_at and p.gpu_finished_at:
            since, until = _ts(p.synth_started_at), _ts(p.gpu_finished_at)
            row.update(synth_s=(_ts(p.synth_finished_at) - since) if p.synth_finished_at else None,
                       prove_s=(until - _ts(p.gpu_started_at)) if p.gpu_started_at else None,
                       window=(since, until), peak=sampler.peak(since, until))
        result.partitions.append(row)
    result.verified = sum(1 for r in result.partitions if r["verified"])
    windows = [r["window"] for r in result.partitions if "window" in r]
    result.max_concurrent = max((sum(1 for a, b in windows if a <= t < b) for t, _ in windows), default=0)
    return result


def prove_job(name: str, shape: Any, proc: subprocess.Popen[bytes], sampler: TreeSampler, log_path: Path,
              stop_after: int | None) -> tuple[Any, float]:
    """Submit a demo job of ``shape`` and follow it to its end (or ``stop_after`` partitions
    done, then cancel the rest and wait until they are dropped): (the job, seconds)."""
    from engine.circuits.kinds import validate_inputs
    from engine.ledger.demo import demo_inputs
    from engine.ledger.jobs import submit_job
    from engine.models import Partition

    circuit_id = f"{shape.kind}/{shape.scale}"
    inputs, n = validate_inputs(shape.kind, demo_inputs(shape.kind))
    job_id = f"scale-{name}-{int(time.time())}"
    job, _ = submit_job(kind=shape.kind, job_id=job_id, inputs=inputs, num_partitions=n, circuit_id=circuit_id,
                        scale=shape.scale)
    t0 = time.perf_counter()
    target = stop_after or n
    say(f"{name}: submitted {job_id}: {n} partitions; waiting for {target} done")
    last = ""
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"{name}: the engine exited ({proc.returncode}); see {log_path}")
        states = list(Partition.objects.filter(job=job).values_list("state", flat=True))
        job.refresh_from_db()
        line = " ".join(f"{s}:{states.count(s)}" for s in sorted(set(states)))
        now = sampler.samples[-1] if sampler.samples else None
        if line != last:
            rss = f", tree {gib(now.tree)}" if now else ""
            say(f"{name}: +{time.perf_counter() - t0:.0f}s {line}{rss} (peak {gib(sampler.peak())})")
            last = line
        if job.state in ("done", "failed", "cancelled") or states.count("done") >= target:
            break
        time.sleep(0.5)  # polling rows the engine writes: the bench has nothing else to do
    if job.state not in ("done", "failed", "cancelled"):  # the solo run: drop the rest, so the tree can rest
        from engine.ledger.jobs import cancel_job

        cancel_job(job)
        wait_for(lambda: not Partition.objects.filter(job=job, state__in=ACTIVE).exists(), proc, 600,
                 "the cancelled partitions to be dropped")
    return job, time.perf_counter() - t0


def engine_reserved_now(host: str) -> dict[str, int]:
    from engine.models import EngineHost

    row = EngineHost.objects.filter(name=host, stopped_at__isnull=True).values_list("reserved_by_engine", flat=True)
    return dict(row.first() or {})


# The partition states in which an engine holds a partition's memory.
ACTIVE = ("reserving", "synthesizing", "synth_done", "gpu", "finalizing")


def _ts(at: datetime) -> float:
    return at.timestamp()


def wait_for(condition: Any, proc: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if proc.poll() is not None:
            raise SystemExit(f"the engine exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting {seconds:.0f} s for {what}")
        time.sleep(0.2)  # polling rows the engine writes


def resident_key(host: str, circuit_id: str) -> dict[str, Any]:
    """The engine's record of the key on ``host`` (its tier, bytes, load time)."""
    from engine.status.read_model import live_farm

    for _ in range(50):  # the record follows the load at the next heartbeat
        with live_farm(whole=True) as farm:
            pass
        for h in farm.live_hosts:
            if h.name != host:
                continue
            for key in farm.held[h.pk].keys:
                if key.circuit_id == circuit_id and key.tier == "hot":
                    return {"load_seconds": key.load_seconds, "bytes": key.bytes}
        time.sleep(0.2)
    return {}


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--circuit", default="porep-c2/large", help="a built-in circuit id (default porep-c2/large)")
    parser.add_argument("--data-dir", default="/tmp/scale-data",
                        help="keys go to DATA_DIR/params (large keys are big: never in the repo); each run's database "
                             "to a fresh folder under it")
    parser.add_argument("--params-dir", type=Path, help="the keys' folder (default DATA_DIR/params)")
    parser.add_argument("--concurrent", type=int, default=2, help="partitions the budget is sized for (default 2)")
    parser.add_argument("--solo-partitions", type=int, default=1,
                        help="partitions proved in the solo run (budget for one) before it stops; 0 skips it")
    parser.add_argument("--no-concurrent", action="store_true", help="only the solo run (to study one partition)")
    parser.add_argument("--devices", default="cpu")
    parser.add_argument("--synthesis", type=int, default=2, help="the engine's synthesis processes")
    parser.add_argument("--sample-ms", type=float, default=50.0, help="RSS sampling interval")
    parser.add_argument("--baseline-s", type=float, default=3.0, help="idle window sampled for the baseline")
    parser.add_argument("--tier-repeat", type=int, default=1, help="proofs per tier in the key-tier step; 0 skips it")
    parser.add_argument("--second-job", action="store_true",
                        help="after the concurrent run's job, let the engine rest a few heartbeats, then prove a "
                             "second job and report its peak")
    parser.add_argument("--cold-matrices", action="store_true",
                        help="remove the circuit's compiled matrices from the cache before each engine run")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    args = parser.parse_args()

    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=data))
    params = args.params_dir or data / "params"
    env = {**os.environ, "PROVINGSITE_DATA_DIR": str(run_dir), "PROVINGSITE_PARAMS_DIR": str(params),
           "DJANGO_SETTINGS_MODULE": "provingsite.settings", "LOG_LEVEL": os.environ.get("LOG_LEVEL", "info")}
    os.environ.update({k: env[k] for k in ("PROVINGSITE_DATA_DIR", "PROVINGSITE_PARAMS_DIR", "DJANGO_SETTINGS_MODULE")})
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    say(f"{args.circuit}: data {run_dir}, params {params}, {os.cpu_count()} cores, "
        f"{gib(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'))} RAM")

    setup_s, zkey_bytes = ensure_key(args.circuit)
    est = estimates(args.circuit)
    est.rest_bytes = engine_rest(args, env)
    est.compiled_bytes = args.synthesis * compiled_estimate(args.circuit)
    fixed = est.rest_bytes + est.key_bytes + est.compiled_bytes
    budget = fixed + args.concurrent * est.partition_bytes
    say(f"estimates: engine processes at rest {gib(est.rest_bytes)} (the engine's own measure), key charged "
        f"{gib(est.key_bytes)} (zkey file {gib(zkey_bytes)}), compiled matrices {gib(est.compiled_bytes)} "
        f"({args.synthesis} synthesis processes), one partition "
        f"{gib(est.partition_bytes)} (witness {gib(est.witness_bytes)} + a/b/c {gib(est.abc_bytes)} + prover's "
        f"working arrays {gib(est.work_bytes)}); "
        f"budget rest + key + compiled + {args.concurrent} partitions = {gib(budget)}")

    solo = None
    if args.solo_partitions:
        solo = run_engine("solo", args.circuit, fixed + est.partition_bytes, args, env, args.solo_partitions)
    pair = None if args.no_concurrent else run_engine("concurrent", args.circuit, budget, args, env, None)

    tiers = None
    if args.tier_repeat:
        from bench.key_tiers import measure

        say(f"key tiers: cold → hot, hot → warm, a proof with each ({args.tier_repeat} each)…")
        tiers = measure(args.circuit, args.tier_repeat)

    text = report(args, est, budget, setup_s, zkey_bytes, solo, pair, tiers)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
        say(f"wrote {args.markdown}")
    if pair is not None and (pair.job_state != "done" or pair.peak > pair.budget):
        sys.exit(1)


def report(args: argparse.Namespace, est: Estimates, budget: int, setup_s: float | None, zkey_bytes: int,
           solo: EngineRun | None, pair: EngineRun | None, tiers: list[object] | None) -> str:
    from bench._table import markdown_table

    rows: list[list[object]] = [
        ["key setup (development keys)", f"{setup_s:.1f} s" if setup_s is not None else "present (set up earlier)"],
        ["zkey file", gib(zkey_bytes)],
        ["estimate: key (points, matrices, fixed-base tables)", gib(est.key_bytes)],
        ["estimate: one partition (witness + a/b/c + prover's working arrays)",
         f"{gib(est.partition_bytes)} ({gib(est.witness_bytes)} + {gib(est.abc_bytes)} + {gib(est.work_bytes)})"],
        ["estimate: engine processes at rest (the engine's own measure, reserved)", gib(est.rest_bytes)],
        [f"estimate: compiled matrices, {args.synthesis} synthesis processes", gib(est.compiled_bytes)],
        [f"budget = rest + key + compiled + {args.concurrent} partitions (PROVINGSITE_MEMORY_BUDGET)", gib(budget)],
    ]
    for run in (r for r in (solo, pair) if r is not None):
        n = run.name
        done = sum(1 for p in run.partitions if p["state"] == "done")
        synth = [p["synth_s"] for p in run.partitions if p.get("synth_s") is not None]
        prove = [p["prove_s"] for p in run.partitions if p.get("prove_s") is not None]
        idle, rested, after = run.idle, run.rested, run.after
        rows += [
            [f"**{n}** (budget {gib(run.budget)})", ""],
            [f"{n}: partitions done / verified / of; job state; wall",
             f"{done} / {run.verified} / {len(run.partitions)}; {run.job_state}; {run.wall_s:.0f} s"],
            [f"{n}: most partitions in flight at once", run.max_concurrent],
            [f"{n}: synthesis s, prove s (mean per partition)",
             f"{sum(synth) / len(synth):.1f}, {sum(prove) / len(prove):.1f}" if synth and prove else "-"],
            [f"{n}: tree at rest, no key (engine + synthesis pool)",
             f"{gib(idle['tree'])} ({gib(idle['engine'])} + {gib(idle['pool'])})"],
            [f"{n}: key preload, asked → hot (engine's own load time)",
             f"{run.preload_s:.1f} s ({run.engine_load_s:.1f} s)" if run.engine_load_s is not None
             else f"{run.preload_s:.1f} s"],
            [f"{n}: key resident (rest with key − rest without: engine, pool) / charged",
             f"{gib(rested['tree'] - idle['tree'])} ({gib(rested['engine'] - idle['engine'])}, "
             f"{gib(rested['pool'] - idle['pool'])}) / {gib(run.held_key_bytes)}"],
            [f"{n}: key load peak above rest without", gib(run.load_peak - idle["tree"])],
            [f"{n}: peak tree RSS (engine; pool)", f"{gib(run.peak)} ({gib(run.peak_engine)}; {gib(run.peak_pool)})"],
            [f"{n}: **peak tree / budget**", f"{run.peak / run.budget:.2f}"],
            [f"{n}: peak tree − rest without key, against the budget",
             f"{gib(run.peak - idle['tree'])} / {gib(run.budget)} = {(run.peak - idle['tree']) / run.budget:.2f}"],
            [f"{n}: engine peak above its rest with the key", gib(run.peak_engine - rested["engine"])],
            [f"{n}: pool peak above its rest before the job; kept after (its matrices)",
             f"{gib(run.peak_pool - rested['pool'])}; {gib(after['pool'] - rested['pool'])}"],
            [f"{n}: tree peak above its rest after the job, per partition in flight",
             f"{gib((run.peak - after['tree']) / max(run.max_concurrent, 1))}"
             f" (estimate {gib(est.partition_bytes)})"],
        ]
        if run.second_state:
            rows += [
                [f"{n}: engine processes reserved after the first job (re-measured at rest)", gib(run.rest_reserved)],
                [f"{n}: second job's state; **peak tree / budget**",
                 f"{run.second_state}; {gib(run.second_peak)} / {gib(run.budget)} = {run.second_peak / run.budget:.2f}"],
            ]
    lines = [f"## {args.circuit}", "", markdown_table(["figure", "value"], rows)]
    if tiers is not None:
        lines += ["", "Key per tier (bench/key_tiers.py's measure, in the bench process):", "",
                  markdown_table(["circuit", "cold load s", "hot→warm s", "hot bytes", "warm bytes", "mapped bytes",
                                  "prove hot s", "prove warm s", "verified"], [tiers])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
