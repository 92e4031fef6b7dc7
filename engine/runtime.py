"""The engine of one host: every piece of the pipeline wired together, one thread per role.

    dispatch ──► synthesis pool (processes) ──► synth-collect ──► GPU queue
        ──► gpu-<device>-W<n> (split: launch, hand over) ──► finalize-* ──► records
    heartbeat (host row, leases, rescue of lapsed work) · sweep (drops cancelled work)

``Engine.start()`` registers the host and its worker slots and starts the threads;
``Engine.stop(drain_seconds)`` stops claiming, lets in-flight work finish for up to
``drain_seconds``, hands back whatever is left (without counting it as a failure), and
marks the host stopped.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.db.backends.signals import connection_created
from django.utils import timezone

from engine import devices as devices_mod
from engine.finalize import Finalizers
from engine.format import fmt_bytes
from engine.heartbeat import orphaned_by_previous_run, renew_leases
from engine.keycache import KeyCache
from engine.memory import MemoryManager, budget_bytes
from engine.models import EngineHost, Partition
from engine.prove import GpuQueue, GpuWorker, worker_rows
from engine.record import Refused, StatusWriter, Transition
from engine.states import PartitionState
from engine.synthesize import Synthesis, WorkItem, load_item

log = logging.getLogger("engine")
P = PartitionState


@dataclass(frozen=True)
class EngineConfig:
    budget: str = "auto"
    margin: str = "2GiB"
    synthesis: int = 2
    workers_per_device: int = 2
    devices: str = "auto"
    scale: str = "tiny"
    host_name: str = ""
    split: bool = True
    heartbeat_seconds: float = 2.0
    sweep_seconds: float = 0.2

    @classmethod
    def from_settings(cls, **overrides: Any) -> EngineConfig:
        s = settings.PROVINGSITE
        base = cls(budget=str(s["MEMORY_BUDGET"]), margin=str(s["MEMORY_SAFETY_MARGIN"]),
                   synthesis=int(s["SYNTHESIS_CONCURRENCY"]), workers_per_device=int(s["WORKERS_PER_DEVICE"]),
                   devices=str(s["DEVICES"]), scale=str(s["SCALE"]), host_name=str(s["HOST_NAME"]),
                   heartbeat_seconds=float(s["HEARTBEAT_SECONDS"]))
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def load_proving_key(circuit_id: str) -> Any:
    """The circuit's proving key; a fresh machine gets development keys made on first use."""
    from engine import circuit_keys
    from engine.circuits.keystore import KeyStore
    from engine.circuits.kinds import parse_circuit_id

    if circuit_keys.is_registered(circuit_id):  # a circom circuit registered through the API
        return circuit_keys.load_key(circuit_id)
    shape = parse_circuit_id(circuit_id)
    keys = KeyStore(settings.PROVINGSITE["PARAMS_DIR"])
    if not keys.keys_present(shape):
        log.info("generating development proving key for %s (one time, into %s)", circuit_id, keys.params_dir)
        keys.ensure_keys(shape)
    return keys.load_proving_key(circuit_id)


def bound_idle_transactions(sender: Any, connection: Any, **_: Any) -> None:
    """PostgreSQL: end a session left idle inside a transaction (a frozen or hung host).

    Engine transactions last milliseconds; one idle for seconds belongs to a process that
    stopped mid-way, and its row locks (the status clock's above all) would stall every
    other host. The server rolls it back well before the host's lease would lapse.
    """
    if connection.vendor != "postgresql":
        return
    seconds = min(float(settings.PROVINGSITE["LEASE_SECONDS"]) / 2, 5.0)
    with connection.cursor() as cursor:
        cursor.execute(f"SET idle_in_transaction_session_timeout = {int(seconds * 1000)}")


@dataclass
class Stats:
    completed: int = 0
    failed: int = 0
    dropped: int = 0
    items: list[dict[str, float]] = field(default_factory=list)


class Engine:
    def __init__(self, config: EngineConfig | None = None, key_loader: Callable[[str], Any] = load_proving_key) -> None:
        self.config = config or EngineConfig.from_settings()
        self.devices = devices_mod.discover(self.config.devices)
        self.backend = devices_mod.backend_of(self.devices)
        self.memory = MemoryManager(budget_bytes(self.config.budget, self.config.margin))
        self.keycache = KeyCache(self.memory, key_loader)
        self.gpu_queue = GpuQueue()
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.queue_empty = threading.Event()
        self.draining = threading.Event()  # an operator's drain, read from the host row at each beat
        self.inflight: dict[int, WorkItem] = {}
        self._inflight_lock = threading.Lock()
        self.stats = Stats()
        self.threads: list[threading.Thread] = []
        self.workers: list[GpuWorker] = []
        self._stopped = threading.Event()
        n_workers = len(self.devices) * self.config.workers_per_device
        self.pace_target = self.config.synthesis + 2 * n_workers
        self.host: EngineHost | None = None
        self.writer: StatusWriter
        self.synthesis: Synthesis
        self.finalizers: Finalizers

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Engine:
        """Register, build the pipeline, start every thread."""
        self.prepare()
        self.synthesis.warm_up()
        self.beat()
        self._spawn("heartbeat", self._heartbeat_forever)
        self._spawn("sweep", self._sweep_forever)
        self._spawn("synth-collect", self.synthesis.collect_forever)
        for w in self.workers:
            self._spawn(f"gpu-{w.device.replace(':', '')}-W{w.row.ordinal}", w.run)
        self._spawn("dispatch", self.synthesis.dispatch_forever)
        assert self.host is not None
        log.info("engine %s started: backend %s, devices %s, %d worker(s) per device, split proving %s, "
                 "memory budget %s, synthesis %d, scale %s", self.host.name, self.backend,
                 ", ".join(f"{d.name} ({d.label})" for d in self.devices), self.config.workers_per_device,
                 "on" if self.config.split else "off", fmt_bytes(self.memory.budget), self.config.synthesis,
                 self.config.scale)
        return self

    def prepare(self) -> Engine:
        """Register the host and its worker slots and build every piece, starting no thread."""
        connection_created.connect(bound_idle_transactions, weak=False)
        if connection.connection is not None:
            bound_idle_transactions(None, connection)
        self.host = self._register_host()
        self.writer = StatusWriter(self.host)
        self.synthesis = Synthesis(self, self.config.synthesis)
        n_workers = len(self.devices) * self.config.workers_per_device
        self.finalizers = Finalizers(self, threads=max(2, n_workers))
        locks = {d.name: threading.Lock() for d in self.devices}
        for row in worker_rows(self.host, [d.name for d in self.devices], self.config.workers_per_device):
            self.workers.append(GpuWorker(self, row, locks[row.device], self.config.split))
        return self

    def _register_host(self) -> EngineHost:
        name = self.config.host_name or socket.gethostname()
        host, _ = EngineHost.objects.get_or_create(name=name)
        now = timezone.now()
        EngineHost.objects.filter(pk=host.pk).update(
            backend=self.backend, started_at=now, heartbeat_at=now, stopped_at=None,
            memory_budget_bytes=self.memory.budget, memory_total_bytes=self._total_ram(),
            synthesis_max=self.config.synthesis)
        # Work this name held in an earlier life is nobody's now: let the rescue take it.
        stale = orphaned_by_previous_run(host.pk)
        if stale:
            log.warning("%d partition(s) held by an earlier run of %s will be requeued", stale, name)
        host.refresh_from_db()
        return host

    @staticmethod
    def _total_ram() -> int:
        from engine.memory import total_ram

        return total_ram()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        def run() -> None:
            try:
                target()
            except Exception:
                log.exception("engine thread %s died", name)
            finally:
                connection.close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self, drain_seconds: float = 30.0) -> None:
        """No new claims; in-flight work finishes within ``drain_seconds`` or is handed back."""
        if self._stopped.is_set():
            return
        self.stopping.set()
        self.wake.set()
        deadline = time.monotonic() + drain_seconds
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.05)
        left = list(self.inflight.values())
        for item in left:
            item.dropped = True
            self.writer.hand_back(item.claim, "handed back: engine stopping")
        for item in self.gpu_queue.drain():
            self.release(item)
        if left:
            log.warning("handed back %d partition(s) not finished within %.0fs", len(left), drain_seconds)
        self.gpu_queue.close()
        self._stopped.set()
        for thread in self.threads:
            if thread.name != "synth-collect":
                thread.join(timeout=max(deadline - time.monotonic(), 0) + 10)
        self.synthesis.stop()
        self.finalizers.stop()
        self.keycache.clear()
        self.writer.update_host(stopped_at=timezone.now(), memory_used_bytes=0, memory_by_owner={},
                                synthesis_active=0, key_cache=[])
        log.info("engine %s stopped: %d proved, %d failed", self.host.name if self.host else "?",
                 self.stats.completed, self.stats.failed)
        connection.close()

    def run_until_idle(self, poll: float = 0.1, timeout: float | None = None) -> bool:
        """Block until nothing is claimable and nothing is in flight (for --once and tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        calm = 0
        while calm < 3:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(poll)
            calm = calm + 1 if self.queue_empty.is_set() and not self.inflight else 0
        return True

    # -- what the pipeline calls ---------------------------------------------------------

    def load_item(self, claim: Any) -> WorkItem | None:
        item = load_item(claim, self.config.scale)
        with self._inflight_lock:
            self.inflight[claim.partition_id] = item
        return item

    def record(self, item: WorkItem, target: str, **fields: Any) -> bool:
        """Write one transition for ``item``. When it cannot be written the item is dropped
        here, its memory freed, and False returned: the caller only stops."""
        try:
            self.writer.apply(Transition(item.claim, target, fields))
        except Refused:
            self.drop(item)
            return False
        except DatabaseError as exc:
            # The database is unreachable or killed our session: drop the work here; its
            # lease lapses and another host (or this one, later) proves it again.
            log.error("recording %s for %s failed (%s); the lease will requeue it", target, item.label, exc)
            connection.close()
            self.drop(item)
            return False
        return True

    def fail(self, item: WorkItem, reason: str, retryable: bool) -> None:
        log.warning("%s failed: %s", item.label, reason)
        try:
            self.writer.apply(Transition(item.claim, P.FAILED, reason=reason, retryable=retryable))
            self.stats.failed += 1
        except Refused:
            pass
        except DatabaseError as exc:
            log.error("recording the failure of %s failed (%s); the lease will requeue it", item.label, exc)
            connection.close()
        self.release(item)

    def drop(self, item: WorkItem, hand_back: bool = False) -> None:
        """Abandon work the records no longer want (cancelled, fenced), freeing its memory."""
        item.dropped = True
        if hand_back:
            self.writer.hand_back(item.claim, "handed back: engine stopping")
        self.stats.dropped += 1
        self.release(item)

    def completed(self, item: WorkItem) -> None:
        self.stats.completed += 1
        self.stats.items.append(dict(item.timings))
        self.release(item)

    def release(self, item: WorkItem) -> None:
        """Free everything ``item`` holds; safe to call twice."""
        with self._inflight_lock:
            if self.inflight.pop(item.claim.partition_id, None) is None:
                return
        if item.reservation is not None:
            item.reservation.release()
        if item.key is not None and item.shares_key:
            self.keycache.check_in(item.circuit_id)
        item.key = item.assignment = item.pending = None

    # -- heartbeat and sweep -------------------------------------------------------------

    def host_fields(self) -> dict[str, Any]:
        snap = self.memory.snapshot()
        return {"heartbeat_at": timezone.now(), "memory_used_bytes": snap["used"],
                "memory_budget_bytes": snap["budget"], "memory_by_owner": snap["by_owner"], "memory_waiting": snap["waiting"],
                "synthesis_active": self.synthesis.active, "synthesis_max": self.config.synthesis,
                "devices": devices_mod.device_report(self.devices), "key_cache": self.keycache.snapshot()}

    def beat(self) -> None:
        assert self.host is not None
        claims = [item.claim for item in list(self.inflight.values())]
        with self.writer.lock:
            renew_leases(self.host.pk, claims)
        self.writer.update_host(**self.host_fields())
        if EngineHost.objects.filter(pk=self.host.pk, draining=True).exists() != self.draining.is_set():
            (self.draining.clear if self.draining.is_set() else self.draining.set)()
            log.info("engine %s %s", self.host.name, "draining: claims nothing new" if self.draining.is_set() else "resumed")
        self.writer.requeue_lapsed()

    def _heartbeat_forever(self) -> None:
        while not self._stopped.wait(self.config.heartbeat_seconds):
            try:
                self.beat()
            except Exception:  # a database hiccup must not stop the heartbeat for good
                log.exception("heartbeat failed")
                close_old_connections()

    def sweep(self) -> None:
        """Drop in-flight work whose record moved on (cancelled, requeued, failed elsewhere)."""
        items = {pk: item for pk, item in list(self.inflight.items()) if not item.dropped}
        if not items:
            return
        rows = Partition.objects.filter(pk__in=list(items)).values_list("pk", "state", "attempt", "host_id")
        for pk, state, attempt, host_id in rows:
            item = items[pk]
            # Done and failed are this host's own writes; anything else means the record moved on.
            if state == P.CANCELLED or attempt != item.claim.attempt or host_id != item.claim.host_id:
                item.dropped = True
                queued = self.gpu_queue.remove(pk)
                if queued is not None:
                    self.drop(queued)
                log.info("dropped %s: its record is %s (attempt %d)", item.label, state, attempt)

    def _sweep_forever(self) -> None:
        while not self._stopped.wait(self.config.sweep_seconds):
            try:
                self.sweep()
            except Exception:
                log.exception("sweep failed")
                close_old_connections()
