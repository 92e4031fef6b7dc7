"""The engine of one host: the stages wired together, one thread per role.

    dispatch (claim → reserve) ──► synthesis pool (processes) ──► synth-collect ──► proof queue
        ──► gpu-<device>-W<n> (prove: launch, hand over) ──► finalize-* ──► the ledger
    heartbeat (host row, leases, rescue of lapsed work) · sweep (drops cancelled work)
    key-control (operators' preloads and evicts, woken when one is asked)

Only ``runengine`` (and the tests and benchmarks that run a real engine) import this module;
each stage gets what it uses (its inbox, its outbox, the in-flight book), never the host.

``Engine.start()`` registers the host and its worker slots and starts the threads;
``Engine.stop(drain_seconds)`` stops claiming, lets in-flight work finish for up to
``drain_seconds``, hands back whatever is left (without counting it as a failure), and
marks the host stopped.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.backends.signals import connection_created
from django.utils import timezone

from engine.format import fmt_bytes
from engine.ledger.claims import Claim
from engine.ledger.hosts import register_host, worker_rows
from engine.ledger.leases import orphaned_by_previous_run, renew_leases
from engine.ledger.new_work import CHANNEL, KEY_CHANNEL, listen, on_key_requests, on_new_work
from engine.ledger.writer import StatusWriter
from engine.models import EngineHost, Partition
from engine.pipeline import devices as devices_mod
from engine.pipeline import handover, job_log, lifecycle
from engine.pipeline.block_pool import BlockPool
from engine.pipeline.claim import Dispatcher
from engine.pipeline.device_memory import DeviceMemory, device_budget_bytes
from engine.pipeline.finalize import Finalizers
from engine.pipeline.host_figures import HostSampler
from engine.pipeline.inflight import InFlight, Signals, Stats
from engine.pipeline.key_control import carry_out
from engine.pipeline.keycache import KeyCache
from engine.pipeline.keymap import map_key
from engine.pipeline.keys import farm_checked, held_nbytes, load_proving_key, load_transient_bytes
from engine.pipeline.memory import MemoryBudgetError, MemoryManager, Reservation, budget_bytes, gpu_memory, total_ram
from engine.pipeline.notify import notify_forever
from engine.pipeline.plan import plan
from engine.pipeline.prove import ProofQueue, Proving, ProvingWorker
from engine.pipeline.reserve import Reservations
from engine.pipeline.supervise import Health, retry_while_down, supervise
from engine.pipeline.synthesize import Synthesis
from engine.pipeline.work import WorkItem, load_item
from engine.prover.backends.cpu.native_build import default_threads
from engine.states import PartitionState
from engine.status.holdings import HANDOVER_OWNER, PROCESSES_OWNER, engine_held
from engine.status.host_report import ThreadDown

log = logging.getLogger("engine")
P = PartitionState
# Growth of the processes at rest reserved when idle: smaller steps would rewrite the host row
# for the allocator's noise.
RECHARGE_STEP = 16 << 20
# How long the stop's own writes (hand-backs, the host marked stopped) wait for a database
# that went away: a restart takes seconds; an engine told to stop must not hang for ever.
STOP_WRITE_SECONDS = 10.0
# Handover blocks at rest this long are freed: an idle engine holds no tmpfs for work that may
# not come (engine.pipeline.block_pool).
BLOCKS_REST_SECONDS = 60.0


def write_retry_seconds() -> float:
    """How long a partition's transition is tried again while the database is away before the
    partition is given up to its lease: long enough for a restart, a few leases at least."""
    return max(30.0, 4 * float(settings.PROVINGSITE["LEASE_SECONDS"]))


def once[**A](loop: Callable[A, None], *args: A.args, **kwargs: A.kwargs) -> bool:
    """A loop that handles its own errors, as a supervised step that runs once."""
    loop(*args, **kwargs)
    return False


def tree_rss(pids: list[int]) -> int:
    """The resident bytes of these processes together (those gone are skipped), less their
    shared-memory pages: the handover blocks a synthesis process keeps mapped, reserved already
    under the block pool's own name (and counted once however many processes map them)."""
    import psutil

    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss - _rss_shmem(pid)
        except psutil.Error:
            pass
    return total


def _rss_shmem(pid: int) -> int:
    """Resident shared-memory (tmpfs) bytes of ``pid``, where Linux says (0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssShmem:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@dataclass(frozen=True)
class EngineConfig:
    budget: str = "auto"
    margin: str = "2GiB"
    # Each CUDA device's budget (engine.pipeline.device_memory): "auto" = its total less the margin.
    device_budget: str = "auto"
    device_margin: str = "1GiB"
    synthesis: int = 0  # 0: from the cores and the devices (engine.pipeline.plan)
    workers_per_device: int = 2
    devices: str = "auto"
    scale: str = "tiny"
    host_name: str = ""
    split: bool = True
    heartbeat_seconds: float = 2.0
    sweep_seconds: float = 0.2
    # New work wakes the claim loop at once (engine.ledger.new_work); off, it is found by the
    # loop's idle poll alone (bench/engine.py's reference for the submission-to-claim latency).
    wake_on_new_work: bool = True
    # Batched proving: up to batch_max partitions of one key per launch (1: off; 0: 4 on CUDA,
    # off on the CPU), waiting at most batch_wait_ms for more once a worker holds one.
    batch_max: int = 0
    batch_wait_ms: float = 20.0
    # The pacer: synthesized partitions kept waiting per device (0: the batch size, at least 2).
    pace_ahead: int = 0
    # On a GPU host, circuits of at most this many domain rows are proved on the CPU (0: never).
    cpu_max_domain: int = 2048
    synthesis_nice: int = 5
    # Reserve the engine's processes at rest (the engine and its synthesis pool, measured once
    # they are up) under "engine processes", so the budget bounds the whole process tree.
    charge_processes: bool = True

    @classmethod
    def from_settings(cls, **overrides: Any) -> EngineConfig:
        s = settings.PROVINGSITE
        base = cls(budget=str(s["MEMORY_BUDGET"]), margin=str(s["MEMORY_SAFETY_MARGIN"]),
                   device_budget=str(s["DEVICE_MEMORY_BUDGET"]), device_margin=str(s["DEVICE_MEMORY_MARGIN"]),
                   synthesis=int(s["SYNTHESIS_CONCURRENCY"]), workers_per_device=int(s["WORKERS_PER_DEVICE"]),
                   devices=str(s["DEVICES"]), scale=str(s["SCALE"]), host_name=str(s["HOST_NAME"]),
                   heartbeat_seconds=float(s["HEARTBEAT_SECONDS"]), batch_max=int(s["BATCH_MAX"]),
                   batch_wait_ms=float(s["BATCH_WAIT_MS"]), charge_processes=bool(s["CHARGE_PROCESSES"]),
                   pace_ahead=int(s["PACE_AHEAD"]), cpu_max_domain=int(s["CPU_MAX_DOMAIN"]),
                   synthesis_nice=int(s["SYNTHESIS_NICE"]))
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def bound_idle_transactions(sender: Any, connection: Any, **_: Any) -> None:
    """PostgreSQL: end a session left idle inside a transaction (a frozen or hung host).

    Engine transactions last milliseconds; one idle for seconds belongs to a process that
    stopped mid-way, and its row locks (its status clock's, the partitions' and jobs' it wrote) would stall
    the writes that need them. The server rolls it back well before the host's lease would lapse.
    """
    if connection.vendor != "postgresql":
        return
    seconds = min(float(settings.PROVINGSITE["LEASE_SECONDS"]) / 2, 5.0)
    with connection.cursor() as cursor:
        cursor.execute(f"SET idle_in_transaction_session_timeout = {int(seconds * 1000)}")


def checkpoint_wal() -> tuple[int, int, int] | None:
    """SQLite: copy the write-ahead log into the database now, from the heartbeat's thread,
    without waiting for anyone (PASSIVE); what SQLite answers (busy, frames in the log, frames
    copied), or None on PostgreSQL. Left to itself SQLite checkpoints inside whichever commit
    takes the log past 1000 pages, and that commit, with its fsync, took 10–13 ms instead of
    0.5: about once a porep-c2 job on this machine, inside a partition's synthesizing
    transition. Checkpointed every heartbeat, the log restarts before it gets there."""
    if connection.vendor != "sqlite":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            busy, frames, copied = cursor.fetchone()
    except DatabaseError as exc:  # SQLite's own checkpoint still runs: nothing is lost
        log.debug("checkpoint skipped: %s", exc)
        return None
    return int(busy), int(frames), int(copied)


def _key_image_root() -> Path:
    root = Path(settings.DATA_DIR) / "keymaps"
    root.mkdir(parents=True, exist_ok=True)
    return root


class Engine:
    def __init__(self, config: EngineConfig | None = None, key_loader: Callable[[str], Any] = load_proving_key) -> None:
        config = config or EngineConfig.from_settings()
        self.devices = devices_mod.discover(config.devices)
        self.backend = devices_mod.backend_of(self.devices)
        gpus = sum(1 for d in self.devices if d.is_gpu)
        self.plan = plan(default_threads(), gpus, config.synthesis, config.pace_ahead, config.batch_max,
                         config.cpu_max_domain, config.synthesis_nice)
        self.config = replace(config, synthesis=self.plan.synthesis, batch_max=self.plan.batch_max,
                              pace_ahead=self.plan.pace_ahead)
        self.memory = MemoryManager(budget_bytes(self.config.budget, self.config.margin))
        self._held_lock = threading.Lock()
        self.memory.watch(engine_held, self._report_engine_held)
        # Before the key cache: memory running short frees blocks at rest before idle keys.
        self.blocks = BlockPool(self.memory)
        self.device_memory = self._device_memory()
        # Each key a host loads is checked against the farm's record of the circuit's key.
        # Warm keys' images live in this engine's own directory, removed when it stops.
        self.key_images = Path(tempfile.mkdtemp(prefix="keymaps-", dir=_key_image_root()))
        self.keycache = KeyCache(self.memory, farm_checked(key_loader, lambda: self._name()),
                                 on_change=self._report_keys, sizer=held_nbytes,
                                 mapper=lambda key, circuit_id: map_key(key, self.key_images, circuit_id),
                                 transient=load_transient_bytes,
                                 on_drop=self.device_memory.key_dropped if self.device_memory is not None else None)
        self.proof_queue = ProofQueue()
        self.signals = Signals()
        self.threads: list[threading.Thread] = []
        self.workers: list[ProvingWorker] = []
        self._stopped = threading.Event()
        # Set by a second Ctrl-C (hurry): the drain stops waiting and hands everything back now.
        self._hurry = threading.Event()
        # Set when the engine stops or a thread dies: the heartbeat ends then, and its leases lapse.
        self._quiet = threading.Event()
        self.health = Health(on_death=self._quiet.set)
        self._rescue_after = float("-inf")  # no lease rescue before this (monotonic): see beat
        self._host_row_stale = False  # a host-row report failed while the database was away
        self.processes: Reservation | None = None  # the engine's processes at rest, once started
        self._idle_since: float | None = None  # since when nothing was in flight (recharge_processes)
        self._forget_wake: Callable[[], None] = lambda: None
        self._forget_key_wake: Callable[[], None] = lambda: None
        # Set when an operator's key request for this host commits (engine.ledger.new_work);
        # the key-control thread also looks every heartbeat, should a wake be lost.
        self._key_wake = threading.Event()
        self.n_workers = len(self.devices) * self.config.workers_per_device + (1 if self.plan.cpu_lane else 0)
        self.figures = HostSampler(self.devices)
        self.host: EngineHost | None = None
        self.writer: StatusWriter
        self.inflight: InFlight
        self.synthesis: Synthesis
        self.dispatcher: Dispatcher
        self.finalizers: Finalizers

    def _device_memory(self) -> DeviceMemory | None:
        """A budget per CUDA device proved on; None on the CPU (nothing to hold there)."""
        budgets = {d.name: device_budget_bytes(self.config.device_budget, self.config.device_margin,
                                               gpu_memory(d.name)["total"]) for d in self.devices if d.is_gpu}
        if not budgets:
            return None
        return DeviceMemory(budgets, on_change=self._report_device_held)

    @property
    def stats(self) -> Stats:
        return self.inflight.stats

    def adopt(self, claim: Claim) -> WorkItem:
        """A claim this host holds, loaded and sized, in the in-flight book."""
        return self.inflight.add(load_item(claim, self.config.scale))

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Engine:
        """Register, build the pipeline, start every thread."""
        self.prepare()
        assert self.host is not None
        job_log.take(self.host.name)  # the job pages' lines, from the first claim on
        self.synthesis.warm_up()
        self._charge_processes()
        self.beat()
        self._spawn("heartbeat", self._heartbeat_step)
        self._spawn("sweep", self._sweep_step)
        self._spawn("synth-collect", self.synthesis.collect_one)
        for w in self.workers:
            self._spawn(f"gpu-{w.device.replace(':', '')}-W{w.row.ordinal}", w.step)
        self._spawn("dispatch", self.dispatcher.step, halt=self.signals.stopping)
        self._spawn("notify", lambda: once(notify_forever, self.signals.stopping))
        self._forget_key_wake = on_key_requests(self._key_requested)
        self._spawn("key-control", self._key_control_step)
        channels: dict[str, Callable[[str], None]] = {KEY_CHANNEL: lambda pk: self._key_requested(int(pk))}
        if self.config.wake_on_new_work:
            self._forget_wake = on_new_work(self.signals.wake.set)
            channels[CHANNEL] = lambda _: self.signals.wake.set()
        self._spawn("new-work", lambda: once(listen, channels, self.signals.stopping))
        assert self.host is not None
        log.info("engine %s started: backend %s, devices %s, %d worker(s) per device, split proving %s, "
                 "memory budget %s, synthesis %d, scale %s", self.host.name, self.backend,
                 ", ".join(f"{d.name} ({d.label})" for d in self.devices), self.config.workers_per_device,
                 "on" if self.config.split else "off", fmt_bytes(self.memory.budget), self.config.synthesis,
                 self.config.scale)
        return self

    def _charge_processes(self) -> None:
        """Reserve what the engine's processes hold at rest, measured now that the pool is up.

        Without it an explicit budget of key + partitions was exceeded by the interpreters
        themselves (bench/results/scale.md: 332 MiB at rest, engine and two synthesis
        processes). A rest larger than the budget stops the start with the figure."""
        if not self.config.charge_processes:
            return
        rest = tree_rss([os.getpid(), *self.synthesis.pids()])
        self.processes = self.memory.acquire(PROCESSES_OWNER, rest, priority=0, timeout=0)
        log.info("engine processes at rest (engine and %d synthesis process(es)): %s (%d bytes) reserved of the "
                 "budget %s", self.config.synthesis, fmt_bytes(rest), rest, fmt_bytes(self.memory.budget))

    def _busy(self) -> bool:
        return bool(self.inflight) or self.synthesis.active > 0 or any(
            owner.startswith("loading ") for owner in self.memory.snapshot()["by_owner"])

    def recharge_processes(self, settle_s: float | None = None) -> None:
        """Reserve what the processes keep at rest after work, measured while idle: the heap a
        first proof, synthesis or key load leaves them (allocator arenas, the kernels' pools, the
        interpreter's object pools) is held for good, and at 2^16 it was a third of the budget
        (bench/results/scale.md). The tree's RSS less what keys and compiled matrices are
        reserved at is the rest; the reservation only grows, at most to what fits (idle keys may
        be evicted for it: the memory is held either way). Measured once the engine has been idle
        ``settle_s`` (two heartbeats): at the moment the last partition ends its arrays are not
        all freed yet, and a porep-c2/medium run measured 40 MiB too much then."""
        if self.processes is None:
            return
        now = time.monotonic()
        if self._busy():
            self._idle_since = None
            return
        if self._idle_since is None:
            self._idle_since = now
        settle = 2 * self.config.heartbeat_seconds if settle_s is None else settle_s
        if now - self._idle_since < settle:
            return
        held = self.memory.snapshot()["by_owner"]
        # Handover blocks are tmpfs pages, which tree_rss leaves out: nothing of theirs to take off.
        rest = tree_rss([os.getpid(), *self.synthesis.pids()]) - sum(
            n for owner, n in held.items() if owner not in (PROCESSES_OWNER, HANDOVER_OWNER))
        growth = rest - held.get(PROCESSES_OWNER, 0)
        if growth < RECHARGE_STEP or self._busy():  # work that began while measuring is not rest
            return
        try:
            self.memory.extend(self.processes, growth, priority=0, timeout=0)
        except (TimeoutError, MemoryBudgetError) as exc:
            log.warning("engine processes at rest grew by %s after work but it does not fit the budget: %s",
                        fmt_bytes(growth), exc)
            return
        log.info("engine processes at rest grew by %s after work: %s reserved", fmt_bytes(growth),
                 fmt_bytes(self.processes.nbytes))

    def prepare(self) -> Engine:
        """Register the host and its worker slots and build every piece, starting no thread."""
        connection_created.connect(bound_idle_transactions, weak=False)
        if connection.connection is not None:
            bound_idle_transactions(None, connection)
        self.host = self._register_host()
        orphans = handover.remove_orphans()
        if orphans:
            log.warning("removed %d shared block(s) left by engines that died", orphans)
        self.writer = StatusWriter(self.host)
        self.inflight = InFlight(self.writer, retry_seconds=write_retry_seconds(), halt=self._stopped)
        self.synthesis = Synthesis(self.inflight, self.config.synthesis,
                                   float(settings.PROVINGSITE["WITNESS_SECONDS"]), memory=self.memory,
                                   charge_processes=self.config.charge_processes, nice=self.plan.nice)
        self.proof_queue.on_taken = self.synthesis.nudge
        self.reservations = Reservations(self.inflight, self.keycache, self.memory, self.signals.stopping,
                                         prepare=self.synthesis.prepare, pool=self.blocks)
        self.dispatcher = Dispatcher(self.writer, self.inflight, self.signals, self.synthesis, self.proof_queue,
                                     scale=self.config.scale,
                                     pace_target=self.plan.pace_target(len(self.devices) + self.plan.cpu_lane),
                                     refused=self.keycache.refused)
        self.finalizers = Finalizers(self.inflight, Path(settings.PROVINGSITE["PARAMS_DIR"]),
                                     threads=max(2, self.n_workers), device_memory=self.device_memory,
                                     health=self.health, inline=not self.config.split)
        self.proving = Proving(self.inflight, self.device_memory)
        names = [d.name for d in self.devices]
        self.locks = {name: threading.Lock() for name in [*names, "cpu"]}
        lane = {"cpu": 1} if self.plan.cpu_lane else None
        small = self.plan.cpu_max_domain

        def on_cpu(item: WorkItem) -> bool:  # a circuit the device would prove slower than the CPU
            return item.sizes.domain_rows <= small

        for row in worker_rows(self.host, names, self.config.workers_per_device, extra=lane):
            accepts = None if not self.plan.cpu_lane else (on_cpu if row.device == "cpu" else
                                                           lambda item: not on_cpu(item))
            batch = 1 if self.plan.cpu_lane and row.device == "cpu" else self.config.batch_max
            self.workers.append(ProvingWorker(self.inflight, self.proof_queue, self.proving, row,
                                              self.locks[row.device], self.config.split,
                                              batch=(batch, self.config.batch_wait_ms / 1000), accepts=accepts))
        self._wire()
        self._report_device_held()  # each device's budget, nothing reserved yet
        return self

    def _wire(self) -> None:
        """Who carries out each of the lifecycle's instructions (engine.pipeline.lifecycle): the
        stage that owns it."""
        lc_ = lifecycle
        self.inflight.executors.update({
            (lc_.Reserve, None): self.reservations.reserve,
            (lc_.Release, None): self.reservations.release,
            (lc_.Record, P.SYNTHESIZING): self.synthesis.record_started,
            (lc_.Synthesize, None): self.synthesis.synthesize,
            (lc_.Record, P.SYNTH_DONE): self.synthesis.record_done,
            (lc_.Enqueue, None): self.proof_queue.enqueue,
            (lc_.Dequeue, None): self.proof_queue.dequeue,
            (lc_.Record, P.GPU): self.proving.record_gpu,
            (lc_.Launch, None): self.proving.launch,
            (lc_.Record, P.FINALIZING): self.proving.record_finalizing,
            (lc_.Release, lc_.Hold.LAUNCH): self.proving.release_launch,
            (lc_.Finish, None): self.finalizers.take,
            (lc_.Record, P.DONE): self.finalizers.record_done,
        })

    def _name(self) -> str:
        return self.config.host_name or socket.gethostname()

    def _register_host(self) -> EngineHost:
        name = self._name()
        host = register_host(name, backend=self.backend, memory_budget_bytes=self.memory.budget,
                             memory_total_bytes=total_ram(), synthesis_max=self.config.synthesis,
                             cost_per_hour=settings.PROVINGSITE["HOST_COST_PER_HOUR"] or None)
        # Work this name held in an earlier life is nobody's now: let the rescue take it.
        stale = orphaned_by_previous_run(host.pk)
        if stale:
            log.warning("%d partition(s) held by an earlier run of %s will be requeued", stale, name)
        return host

    def _spawn(self, name: str, step: Callable[[], bool], halt: threading.Event | None = None) -> None:
        """A thread running ``step`` under supervision (engine.pipeline.supervise): a database
        error backs off and tries again (cut short by ``halt``, by default the engine's end),
        any other ends the process."""
        def run() -> None:
            try:
                supervise(name, step, halt or self._stopped, self.health)
            finally:
                connection.close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self, drain_seconds: float = 30.0) -> None:
        """No new claims; in-flight work finishes within ``drain_seconds`` or is handed back."""
        if self._stopped.is_set():
            return
        # This (main) thread's session may have died with a database restart since the start:
        # every write below opens a fresh one.
        connection.close()
        self.signals.stopping.set()
        self.signals.wake.set()
        self._key_wake.set()
        self._forget_wake()
        self._forget_key_wake()
        deadline = time.monotonic() + drain_seconds
        # The claim under way, if any, is in the book before the drain looks: a claim taken as
        # the stop came (or a key the dispatcher was loading) is then drained or handed back.
        for thread in self.threads:
            if thread.name == "dispatch":
                self._join_unless_hurried(thread, max(drain_seconds, 5.0))
        # Claimed ahead and never started (the dispatcher has ended): nothing to finish, so
        # handed back now rather than waited for until the drain's end.
        for item in list(self.inflight.items().values()):
            if item.state.phase is lifecycle.Phase.CLAIMED:
                self.inflight.run(item, lifecycle.Stopping())
        while self.inflight and time.monotonic() < deadline and not self._hurry.is_set():
            time.sleep(0.05)
        left = list(self.inflight.items().values())
        for item in left:  # handed back now; each ends once the stage holding it lets it go
            self.inflight.run(item, lifecycle.Stopping())
        for claim in self.inflight.held_claims():
            self.inflight.hand_back(claim, lifecycle.STOPPING_REASON, seconds=STOP_WRITE_SECONDS)
        if left and not self._hurry.is_set():
            log.warning("handed back %d partition(s) not finished within %.0fs", len(left), drain_seconds)
        self.proof_queue.close()
        self._stopped.set()
        self._quiet.set()
        if self._hurry.is_set():
            # Asked to stop now: what is held is back in the queue; the threads still proving
            # are not waited for (the process exits next, runengine), nor are the synthesis
            # processes (ended, their partitions handed back above).
            self.synthesis.kill()
            self.blocks.close()
            handover.remove_orphans(own=True)
            shutil.rmtree(self.key_images, ignore_errors=True)
            log.warning("handed back %d partition(s) at once", len(left))
            self._record_stopped()
            return
        for thread in self.threads:
            if thread.name != "synth-collect":
                thread.join(timeout=max(deadline - time.monotonic(), 0) + 10)
        self.synthesis.stop()
        self.finalizers.stop()
        self.blocks.close()
        self.keycache.clear()
        if self.device_memory is not None:
            self.device_memory.clear()
        shutil.rmtree(self.key_images, ignore_errors=True)
        self.figures.close()
        self._record_stopped()
        connection.close()

    def hurry(self) -> None:
        """Stop now (a second Ctrl-C): a drain under way stops waiting for in-flight work and
        hands it back at once; ``stop`` then returns without waiting for the threads."""
        self._hurry.set()

    @property
    def hurried(self) -> bool:
        return self._hurry.is_set()

    @property
    def in_flight(self) -> int:
        """Partitions this engine holds now (what a drain would finish)."""
        return len(self.inflight.items()) if hasattr(self, "inflight") else 0

    def _join_unless_hurried(self, thread: threading.Thread, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while thread.is_alive() and not self._hurry.is_set() and time.monotonic() < deadline:
            thread.join(timeout=0.1)

    def _record_stopped(self) -> None:
        try:
            retry_while_down(self.writer.record_stopped, STOP_WRITE_SECONDS, "marking the host stopped")
        except DatabaseError as exc:
            log.error("could not mark %s stopped (%s): its heartbeat ends, so it reads as stale",
                      self.host.name if self.host else "?", exc)
        log.info("engine %s stopped: %d partitions proved, %d failed", self.host.name if self.host else "?",
                 self.stats.completed, self.stats.failed)
        job_log.let_go()  # after every thread that logs about a job has ended: its last lines go too

    def run_until_idle(self, poll: float = 0.1, timeout: float | None = None) -> bool:
        """Block until nothing is claimable and nothing is in flight (for --once and tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        calm = 0
        while calm < 3:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(poll)
            calm = calm + 1 if self.signals.queue_empty.is_set() and not self.inflight else 0
        return True

    # -- heartbeat and sweep -------------------------------------------------------------

    def host_fields(self) -> dict[str, Any]:
        """What a heartbeat writes: that the host lives, its devices' measured memory and the
        machine's measured figures (engine.pipeline.host_figures). Reservations, keys and
        synthesis are facts of the transitions (engine.status.holdings)."""
        down = tuple(ThreadDown(d.thread, d.since, d.error) for d in self.health.down())
        return {"heartbeat_at": timezone.now(), "devices": devices_mod.device_report(self.devices),
                "figures": replace(self.figures.sample(), threads_down=down).to_json()}

    def engine_held(self) -> dict[str, int]:
        """The engine's own reservations (engine.status.holdings.engine_held), by owner."""
        return {owner: n for owner, n in self.memory.snapshot()["by_owner"].items() if engine_held(owner)}

    def _report_engine_held(self) -> None:
        """Written when one changes (the memory manager calls this), as a key's load is: /status
        and the console's memory panel show them with the transitions, not a heartbeat later."""
        if self.host is not None and hasattr(self, "writer"):
            with self._held_lock:  # one writer at a time, each writing what the manager holds then
                self._report(reserved_by_engine=self.engine_held())

    def _report_device_held(self) -> None:
        """Each device's reservations by owner, written when one changes (as reserved_by_engine)."""
        if self.device_memory is not None and self.host is not None and hasattr(self, "writer"):
            with self._held_lock:
                self._report(device_reserved=self.device_memory.snapshot())

    def _report_keys(self) -> None:
        if self.host is not None and hasattr(self, "writer"):
            self._report(key_cache=self.keycache.snapshot(), refused_keys=self.keycache.refused())

    def _report(self, **fields: Any) -> None:
        """A host-row fact written as it changes. Whichever thread changed it (one releasing a
        partition's memory, a key's load) must not fail for a database that went away: the
        heartbeat writes every such fact again once it is back."""
        try:
            self.writer.update_host(**fields)
        except DatabaseError as exc:
            log.warning("could not write %s to the host row (%s); the heartbeat writes it again",
                        ", ".join(fields), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            connection.close()
            self._host_row_stale = True

    def _report_all(self) -> None:
        self._host_row_stale = False
        with self._held_lock:
            fields: dict[str, Any] = {"reserved_by_engine": self.engine_held(), "key_cache": self.keycache.snapshot(),
                                      "refused_keys": self.keycache.refused()}
            if self.device_memory is not None:
                fields["device_reserved"] = self.device_memory.snapshot()
            self._report(**fields)

    def _key_requested(self, host_pk: int) -> None:
        if self.host is not None and host_pk == self.host.pk:
            self._key_wake.set()

    def _key_control_step(self) -> bool:
        """Operators' preloads and evicts (engine.ledger.key_requests) as soon as they are asked,
        on a thread of their own: a key's load may take longer than a beat, and the beat renews
        the leases. Without a wake it looks every heartbeat."""
        assert self.host is not None
        if self.signals.stopping.is_set():
            return False
        self._key_wake.clear()  # before reading: a request committed after the read wakes the next wait
        carry_out(self.host.pk, self.keycache)
        self._key_wake.wait(self.config.heartbeat_seconds)
        return True

    def beat(self) -> None:
        assert self.host is not None
        try:
            claims = self.inflight.claims()
            with self.writer.lock:
                renew_leases(self.host.pk, claims)
            self.writer.beat(**self.host_fields())
            if self._host_row_stale:
                self._report_all()
            draining = self.signals.draining
            if EngineHost.objects.filter(pk=self.host.pk, draining=True).exists() != draining.is_set():
                (draining.clear if draining.is_set() else draining.set)()
                log.info("engine %s %s", self.host.name,
                         "draining: claims nothing new" if draining.is_set() else "resumed")
        except DatabaseError:
            self._cut_off()
            raise
        # Rescue no lease that lapsed while this host was cut off from the database too: every
        # host an outage cut off renews its leases as it comes back, and one that rescued at
        # once would count each of them an attempt lost (a job failed for good after a few
        # restarts). A host that really died is rescued a lease later.
        if time.monotonic() >= max(self._rescue_after, self.health.troubled_at + self._lease_seconds()):
            self.writer.requeue_lapsed()

    def _cut_off(self) -> None:
        self._rescue_after = time.monotonic() + self._lease_seconds()

    @staticmethod
    def _lease_seconds() -> float:
        return float(settings.PROVINGSITE["LEASE_SECONDS"])

    def _heartbeat_step(self) -> bool:
        if self._quiet.wait(self.config.heartbeat_seconds):
            return False
        self.beat()
        self.recharge_processes()
        self.blocks.expire(BLOCKS_REST_SECONDS)
        checkpoint_wal()
        return True

    def sweep(self) -> None:
        """Tell in-flight work whose record moved on (cancelled, requeued, failed elsewhere)."""
        items = {pk: item for pk, item in self.inflight.items().items() if not item.abandoned()}
        if not items:
            return
        rows = Partition.objects.filter(pk__in=list(items)).values_list("pk", "state", "attempt", "host_id")
        for pk, state, attempt, host_id in rows:
            item = items[pk]
            # Done and failed are this host's own writes; anything else means the record moved on.
            if state == P.CANCELLED or attempt != item.claim.attempt or host_id != item.claim.host_id:
                self.inflight.run(item, lifecycle.Cancelled())
                log.info("dropped %s: its record is %s (attempt %d)", item.label, state, attempt,
                         extra=self.inflight.about(item))

    def _sweep_step(self) -> bool:
        if self._stopped.wait(self.config.sweep_seconds):
            return False
        self.sweep()
        return True

    def abort(self) -> None:
        """A thread died: the heartbeat has stopped (Health.death); hand back what this host holds
        so other hosts take it at once rather than a lease later, and mark the host stopped,
        each for a few seconds at most. The process then exits non-zero (runengine)."""
        self.signals.stopping.set()
        self.signals.wake.set()
        self._quiet.set()
        connection.close()
        for claim in self.inflight.claims():
            self.inflight.hand_back(claim, lifecycle.STOPPING_REASON, seconds=STOP_WRITE_SECONDS)
        try:
            retry_while_down(self.writer.record_stopped, STOP_WRITE_SECONDS, "marking the host stopped")
        except DatabaseError as exc:
            log.error("could not mark the host stopped (%s)", exc)
        log.error("engine %s stopped: thread %s died (%s)", self.host.name if self.host else "?", self.health.dead,
                  self.health.cause)
        job_log.let_go()
