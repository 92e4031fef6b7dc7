"""Synthesis: claimed partitions become assignments on real cores.

The dispatcher thread keeps the pool fed: it claims the next partition (claim order), pins
its proving key, reserves the partition's memory from the circuit's real ``MemoryNeeds``
(blocking, so memory is the back-pressure), records ``synthesizing`` and submits the work to
a ``ProcessPoolExecutor``. A collector thread records ``synth_done`` and hands the item to
the GPU queue. A pacer stops claiming once enough synthesized work waits for the GPU, so a
host never hoards partitions another host could be proving.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connection
from django.utils import timezone

from engine import circuit_keys, synthesize_worker
from engine.memory import MemoryBudgetError
from engine.models import Partition
from engine.record import Claim, Refused
from engine.states import PartitionState

if TYPE_CHECKING:
    from engine.runtime import Engine

log = logging.getLogger("engine.synthesize")
P = PartitionState


@dataclass
class WorkItem:
    """One claimed partition on its way through this host, with everything it holds."""

    claim: Claim
    job_pk: int
    job_id: str
    kind: str
    index: int
    priority: int
    submitted_at: datetime
    circuit_id: str
    inputs: dict[str, Any]
    upload_dir: str = ""
    key_bytes: int = 0
    abc_bytes: int = 0
    partition_bytes: int = 0
    key: Any = None
    vk: Any = None
    reservation: Any = None
    assignment: Any = None
    pending: Any = None
    proof: Any = None
    publics: list[str] = field(default_factory=list)
    dropped: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def order(self) -> tuple[int, datetime, int, int]:
        """Oldest job's lowest partition first, within priority."""
        return (self.priority, self.submitted_at, self.job_pk, self.index)

    @property
    def label(self) -> str:
        return f"P{self.index} of {self.kind} {self.job_id}"

    def abandoned(self) -> bool:
        """The prover's abort check: the sweep marks cancelled or fenced work dropped."""
        return self.dropped

    @property
    def shares_key(self) -> bool:
        """The key comes from the host's key cache: a built-in kind's, or a registered circuit's."""
        return self.kind != "custom" or circuit_keys.is_registered(self.circuit_id)

    def public_reason(self, text: str) -> str:
        """A failure's text as the client may read it: a custom job's upload folder (a server
        path that carries the job's internal id) never appears, only the file's own name."""
        if self.kind != "custom" or not self.upload_dir:
            return text
        folder = self.upload_dir.rstrip("/")
        return text.replace(folder + "/", "").replace(folder, "the upload")


def new_pool(concurrency: int) -> ProcessPoolExecutor:
    """Processes that end with the engine, kill -9 included (see synthesize_worker.die_with).

    The kernel's death signal is tied to the spawning thread; the pool spawns from the thread
    that builds it and warms it up (Engine.start), which lives as long as the engine only when it
    is the main thread, so elsewhere the workers rely on their watcher alone.
    """
    kernel_tied = threading.current_thread() is threading.main_thread()
    return ProcessPoolExecutor(max_workers=concurrency, mp_context=multiprocessing.get_context("spawn"),
                               initializer=synthesize_worker.init_worker, initargs=(os.getpid(), kernel_tied))


# ---- the dispatcher and the collector ---------------------------------------------------


class Synthesis:
    def __init__(self, engine: Engine, concurrency: int) -> None:
        self.engine = engine
        self.concurrency = concurrency
        self.pool = new_pool(concurrency)
        self.active = 0
        self._slots = threading.Condition()
        self._done: queue.Queue[tuple[WorkItem, Future[Any]] | None] = queue.Queue()
        self.idle_poll = 0.1

    def warm_up(self) -> None:
        """Start every pool process now, so the first partition does not pay their start."""
        for f in [self.pool.submit(synthesize_worker.nothing) for _ in range(self.concurrency)]:
            f.result()

    # -- dispatcher ------------------------------------------------------------------------

    def dispatch_forever(self) -> None:
        engine = self.engine
        while not engine.stopping.is_set():
            if engine.draining.is_set():  # drained from the console: finish what is held, claim nothing
                engine.queue_empty.set()
                engine.stopping.wait(self.idle_poll)
                continue
            if not self._wait_for_room():
                continue
            try:
                claims = engine.writer.claim(1)
            except DatabaseError as exc:  # the database went away: try again shortly
                log.error("claiming failed: %s", exc)
                connection.close()
                engine.wake.wait(0.5)
                continue
            if not claims:
                engine.queue_empty.set()
                engine.wake.wait(self.idle_poll)
                engine.wake.clear()
                continue
            engine.queue_empty.clear()
            item = engine.load_item(claims[0])
            if item is not None:
                self._start(item)

    def _wait_for_room(self) -> bool:
        """A free pool slot, and not too much synthesized work already waiting (the pacer)."""
        with self._slots:
            full = self.active >= self.concurrency or self.active + len(self.engine.gpu_queue) >= self.engine.pace_target
            if full:
                self._slots.wait(0.2)
                return False
        return True

    def _start(self, item: WorkItem) -> None:
        engine = self.engine
        try:
            if item.shares_key:
                item.key = engine.keycache.checkout(item.circuit_id, item.key_bytes, item.priority)
                if item.kind == "custom":  # a registered circuit: its vk is the cached key's
                    item.vk = item.key.vk
            item.reservation = engine.memory.acquire(
                f"{item.kind} {item.job_id}", item.partition_bytes, item.priority,
                cancelled=lambda: item.dropped or engine.stopping.is_set())
            if not item.shares_key:  # the client's own key, read once per job, inside its reservation
                from pathlib import Path

                from engine.prover import read_zkey

                item.key = read_zkey(Path(item.upload_dir) / "circuit.zkey")
                item.vk = item.key.vk
        except MemoryBudgetError as exc:
            engine.fail(item, str(exc), retryable=False)
            return
        except InterruptedError:
            engine.drop(item, hand_back=engine.stopping.is_set())
            return
        except Exception as exc:  # a missing or corrupt key, a failed setup: say which and why
            log.exception("cannot prepare %s", item.label)
            engine.fail(item, item.public_reason(f"preparing {item.circuit_id}: {exc}"), retryable=False)
            return
        if not engine.record(item, P.SYNTHESIZING, synth_started_at=timezone.now(),
                             reserved_bytes=item.reservation.nbytes + item.key_bytes):
            return  # cancelled (or fenced) since the claim: record() has freed what it held
        with self._slots:
            self.active += 1
        item.timings["synth_submitted"] = time.perf_counter()
        if item.kind == "custom":
            future = self.pool.submit(synthesize_worker.synthesize_custom, item.upload_dir)
        else:
            future = self.pool.submit(synthesize_worker.synthesize_builtin, item.circuit_id, item.inputs, item.index)
        future.add_done_callback(lambda f, item=item: self._done.put((item, f)))

    # -- collector -------------------------------------------------------------------------

    def collect_forever(self) -> None:
        while True:
            entry = self._done.get()
            if entry is None:
                return
            item, future = entry
            with self._slots:
                self.active -= 1
                self._slots.notify_all()
            self._collect(item, future)

    def _collect(self, item: WorkItem, future: Future[Any]) -> None:
        engine = self.engine
        try:
            item.assignment, item.timings["synth_s"] = future.result()
        except Exception as exc:  # the circuit refused the inputs, or the process died
            engine.fail(item, item.public_reason(f"synthesis failed: {type(exc).__name__}: {exc}"),
                        retryable=not _deterministic(exc))
            return
        if item.dropped:
            engine.drop(item)
            return
        from engine.finalize import public_inputs_of

        item.publics = public_inputs_of(item.assignment.public_inputs)
        if engine.record(item, P.SYNTH_DONE, synth_finished_at=timezone.now()):
            engine.gpu_queue.put(item)

    def stop(self) -> None:
        self._done.put(None)
        self.pool.shutdown(wait=True, cancel_futures=True)


def _deterministic(exc: BaseException) -> bool:
    """Errors another attempt cannot fix: the inputs or the circuit are wrong."""
    from concurrent.futures.process import BrokenProcessPool

    return not isinstance(exc, BrokenProcessPool | OSError | MemoryError)


def load_item(claim: Claim, scale: str) -> WorkItem | None:
    """The claimed partition with its job's facts and the circuit's real memory needs."""
    row = Partition.objects.select_related("job").get(pk=claim.partition_id)
    job = row.job
    item = WorkItem(claim=claim, job_pk=job.pk, job_id=job.job_id, kind=job.kind, index=row.index,
                    priority=job.priority, submitted_at=job.submitted_at,
                    circuit_id=job.circuit_id or f"{job.kind}/{scale}", inputs=job.inputs, upload_dir=job.upload_dir)
    size_item(item)
    return item


def size_item(item: WorkItem) -> None:
    if item.kind == "custom":
        _size_custom(item)
        return
    from engine.circuits.kinds import parse_circuit_id

    needs = parse_circuit_id(item.circuit_id).memory
    item.key_bytes = int(needs.key_bytes)
    item.abc_bytes = int(needs.abc_bytes)
    item.partition_bytes = int(needs.witness_bytes + needs.abc_bytes)


def _size_custom(item: WorkItem) -> None:
    """Custom circuits: the reservation follows the sizes the zkey declares (validated at
    upload). The key is read per job, inside the reservation, so none of it is cached."""
    from pathlib import Path

    from engine.circuits.kinds import custom_memory
    from engine.prover.snarkjs import FormatError, inspect_zkey

    zkey = Path(item.upload_dir) / "circuit.zkey"
    try:
        header, n_coef = inspect_zkey(zkey)
        zkey_bytes = zkey.stat().st_size
    except (OSError, FormatError):
        return  # nothing reserved: reading the key in _start fails the partition, not retried
    needs = custom_memory(header.n_vars, header.n_public, header.domain_size, n_coef, header.n8q, zkey_bytes)
    item.abc_bytes = int(needs.abc_bytes)
    if item.shares_key:  # a registered circuit: the key cache holds its key once for every job
        item.key_bytes = int(needs.key_bytes)
        item.partition_bytes = int(needs.witness_bytes + needs.abc_bytes)
        return
    item.key_bytes = 0
    item.partition_bytes = int(needs.key_bytes + needs.witness_bytes + needs.abc_bytes)


__all__ = ["Refused", "Synthesis", "WorkItem", "load_item"]
