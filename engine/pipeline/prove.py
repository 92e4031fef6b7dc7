"""Prove: proving workers, N per device; only the device's own work under the device's lock.

The lifecycle's ``Enqueue`` and ``Dequeue`` (the proof queue), ``Record gpu``, ``Launch`` and
``Record finalizing`` are carried out here. A worker takes the next synthesized partition
(oldest job's lowest partition first) and posts ``Taken``; its record says ``gpu`` with this
worker; the launch then

    holds the launch's device memory, stages the proof on the host (the witness checked
    against the key, a, b, c spread over the domain, each copied where the device uploads
    from: pinned memory on a GPU) — none of it under the lock —
    takes the device's lock for the launch alone: uploads, H on the coset, the MSMs queued

and the record says ``finalizing`` before the worker takes the next partition, so the records
never show a worker on two partitions; the finalizer (engine.pipeline.finalize) waits for the
device and finishes off the worker's path. A worker's card is derived from the records
("proving" iff some partition is in ``gpu`` with that worker), and no finalizer ever writes a
worker's state: the seed system's stale "idle" card cannot happen.

CPU backend: the "device" is a CPU slot named ``cpu``; launching then runs the proof's heavy
steps, so the same loop and records serve both backends (the prover's ``gpu_prove_*`` keep
their names: they are the GPU's path, and the CPU's stand-in for it).

Batches (BATCH_MAX > 1): a worker holding a partition takes up to BATCH_MAX - 1 more of the
same key, records them all ``gpu`` in one transaction, launches them together and then each
member goes on alone; a batch-wide error retries the members one by one, so a bad member
fails alone with its own reason.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.utils import timezone

from engine import prover
from engine.models import Worker
from engine.pipeline import lifecycle as lc
from engine.pipeline.device_memory import DeviceMemory
from engine.pipeline.inflight import InFlight
from engine.pipeline.memory import MemoryBudgetError
from engine.pipeline.work import Launching, WorkItem
from engine.prover import ProofAborted, UnsatisfiedConstraint
from engine.states import PartitionState
from engine.status.holdings import partition_owner

log = logging.getLogger("engine.prove")
P = PartitionState
Accepts = Callable[[WorkItem], bool] | None  # the items a lane's workers take (None: all)


class ProofQueue:
    """Synthesized partitions waiting for a proving worker, served in claim order."""

    def __init__(self, on_taken: Callable[[], None] = lambda: None) -> None:
        self._heap: list[tuple[Any, int, WorkItem]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.closed = False
        # Told (outside the queue's lock) whenever items leave for a worker: the pacer waits on it.
        self.on_taken = on_taken

    def put(self, item: WorkItem) -> None:
        with self._cond:
            heapq.heappush(self._heap, (item.order, next(self._seq), item))
            self._cond.notify()

    def enqueue(self, item: WorkItem, instruction: lc.Enqueue) -> None:
        self.put(item)

    def dequeue(self, item: WorkItem, instruction: lc.Dequeue) -> None:
        self.remove(item.claim.partition_id)

    def take(self, timeout: float = 0.5, accepts: Accepts = None) -> WorkItem | None:
        """The first waiting item (in claim order) ``accepts`` takes (a lane's), waiting up to
        ``timeout`` for one."""
        with self._cond:
            item = self._pop(accepts)
            if item is None and not self.closed:
                self._cond.wait(timeout)
                item = self._pop(accepts)
        if item is not None:
            self.on_taken()
        return item

    def _pop(self, accepts: Accepts) -> WorkItem | None:
        if accepts is None:
            return heapq.heappop(self._heap)[2] if self._heap else None
        for entry in sorted(self._heap):
            if accepts(entry[2]):
                self._heap.remove(entry)
                heapq.heapify(self._heap)
                return entry[2]
        return None

    def take_batch(self, first: WorkItem, limit: int, wait_s: float) -> list[WorkItem]:
        """``first`` and up to limit - 1 more waiting items of its key (the same key object:
        the key cache's, shared by every job of the circuit), in claim order; waits at most
        ``wait_s`` for the batch to fill. Items of other keys stay where they are."""
        batch = [first]
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                for entry in sorted(self._heap):
                    if len(batch) >= limit:
                        break
                    item = entry[2]
                    if item.key is not None and item.key is first.key and not item.abandoned():
                        self._heap.remove(entry)
                        batch.append(item)
                heapq.heapify(self._heap)
                left = deadline - time.monotonic()
                if len(batch) >= limit or left <= 0 or self.closed:
                    break
                self._cond.wait(left)
        if len(batch) > 1:
            self.on_taken()
        return batch

    def remove(self, partition_id: int) -> WorkItem | None:
        with self._cond:
            for i, (_, _, item) in enumerate(self._heap):
                if item.claim.partition_id == partition_id:
                    self._heap.pop(i)
                    heapq.heapify(self._heap)
                    return item
        return None

    def drain(self) -> list[WorkItem]:
        with self._cond:
            items = [entry[2] for entry in self._heap]
            self._heap.clear()
            return items

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)


class Proving:
    """The proving stage's executors, shared by its workers: each acts for the worker that took
    the item (``item.launch.by``)."""

    def __init__(self, book: InFlight, device_memory: DeviceMemory | None = None) -> None:
        self.book = book
        self.device_memory = device_memory  # None, or no budget for a device (the CPU): nothing held

    def record_gpu(self, item: WorkItem, instruction: lc.Record) -> lc.Event:
        assert item.launch is not None
        return self.book.record(item, P.GPU, worker=item.launch.worker, gpu_started_at=timezone.now())

    def launch(self, item: WorkItem, instruction: lc.Launch) -> lc.Event:
        assert item.launch is not None
        worker: ProvingWorker = item.launch.by
        return worker.launch_one(item)

    def record_finalizing(self, item: WorkItem, instruction: lc.Record) -> lc.Event:
        return self.book.record(item, P.FINALIZING, gpu_finished_at=timezone.now())

    def release_launch(self, item: WorkItem, instruction: lc.Release) -> None:
        """A launch no finalizer will finish (dropped after it): its device memory back."""
        self.device_done([item])

    def device_done(self, items: list[WorkItem]) -> None:
        if self.device_memory is not None:
            for item in items:
                self.device_memory.finished(item.claim.partition_id)


class ProvingWorker:
    """One worker slot (W0, W1 … on a device); ``step`` is its thread's turn."""

    def __init__(self, book: InFlight, inbox: ProofQueue, stage: Proving, row: Worker,
                 device_lock: AbstractContextManager[Any], split: bool, batch: tuple[int, float] = (1, 0.0),
                 accepts: Accepts = None) -> None:
        self.book = book
        self.accepts = accepts  # its lane: on a GPU host the CPU worker takes the small circuits alone
        self.inbox = inbox
        self.stage = stage
        self.row = row
        self.device = row.device
        self.lock = device_lock
        self.split = split
        self.busy_s = 0.0  # seconds spent inside the device's lock (the launch, or the whole proof)
        self.started = time.perf_counter()
        self.current: WorkItem | None = None
        self.batch_max, self.batch_wait_s = batch

    @property
    def name(self) -> str:
        return f"{self.device} W{self.row.ordinal}"

    @property
    def whole(self) -> bool:
        """Whether the proof is finished inside the device's lock: only without split proving (a
        benchmark's reference). On the CPU too the finish (the G2 MSM) runs beside the next
        launch: holding it in the lock measured no faster (bench/engine.py, same run)."""
        return not self.split

    @property
    def device_memory(self) -> DeviceMemory | None:
        return self.stage.device_memory

    def step(self) -> bool:
        """The worker thread's step: the next partition (or batch) proved; False once closed."""
        item = self.inbox.take(accepts=self.accepts)
        if item is None:
            return not self.inbox.closed
        if self.batch_max > 1 and item.key is not None and not item.abandoned():
            self.prove_batch(self.inbox.take_batch(item, self.batch_max, self.batch_wait_s))
        else:
            self.prove(item)
        return True

    def prove(self, item: WorkItem) -> None:
        """Take ``item``: its record says gpu with this worker, its launch runs, its record says
        finalizing, and it goes to a finalizer, all before this returns (split proving)."""
        self.current = item
        try:
            if self.occupy(item):
                self.launch(item)
        finally:
            self.current = None

    def taken(self, item: WorkItem) -> lc.Taken:
        item.launch = Launching(worker=self.row, device=self.device, by=self)
        return lc.Taken()

    def occupy(self, item: WorkItem) -> bool:
        """Take the partition onto this worker: from now on the records say it proves it. True
        when its launch is next (False: it ended, cancelled or fenced, and let go)."""
        out = self.book.post(item, self.taken(item))
        if out == [lc.Record(P.GPU)]:
            out = self.book.post(item, self.book.carry_out(item, out[0]) or lc.Refused())
            if out == [lc.Launch()]:
                return True
        self.book.carry(item, out)
        return False

    def launch(self, item: WorkItem) -> bool:
        """Its launch, and what follows until a finalizer has it (or, without split, until it is
        finished); True when it got there."""
        self.book.carry(item, [lc.Launch()])
        return item.state.phase in (lc.Phase.FINISHING, lc.Phase.RECORDING, lc.Phase.DONE)

    def launch_one(self, item: WorkItem) -> lc.Event:
        """The launch: device memory held, host work staged, then the device's lock for the
        device's work alone; what became of it (Launched, Failed, Abandoned)."""
        launch = item.launch
        assert launch is not None and item.held is not None and item.synthesized is not None
        refused = self.hold_device([item])
        if refused is not None:
            return refused
        try:
            staged = prover.gpu_prove_stage(item.held.key, item.synthesized.assignment, self.device)
            with self.lock:
                t0 = time.perf_counter()
                try:
                    launch.pending = prover.gpu_prove_launch(staged, abort=item.abandoned)
                    if self.whole:  # the proof finished before the device is let go
                        launch.proof = prover.gpu_prove_finish(launch.pending, abort=item.abandoned)
                finally:
                    elapsed = time.perf_counter() - t0
                    self.busy_s += elapsed
                    launch.seconds = elapsed
        except ProofAborted:  # cancelled or fenced while proving: its memory is freed now
            self.stage.device_done([item])
            return lc.Abandoned()
        except Exception as exc:  # a kernel or device error: another attempt may succeed
            self.stage.device_done([item])
            log.exception("%s: proving %s failed", self.name, item.label, extra=self.book.about(item))
            # An unsatisfied assignment is the circuit's or the witness's: every attempt fails alike.
            return lc.Failed(item.public_reason(f"proving on {self.device} failed: {type(exc).__name__}: {exc}"),
                             retryable=not isinstance(exc, UnsatisfiedConstraint))
        return lc.Launched()

    # -- batches: several partitions of one key in one launch ----------------------------------

    def prove_batch(self, items: list[WorkItem]) -> None:
        """Occupy all (one ledger transaction, one batch marker), launch them together, then
        each member goes on alone: one member's failure is its own."""
        if len(items) == 1:
            self.prove(items[0])
            return
        self.current = items[0]
        try:
            self.launch_batch(self.occupy_batch(items))
        finally:
            self.current = None

    def occupy_batch(self, items: list[WorkItem]) -> list[WorkItem]:
        """Every member taken and recorded ``gpu`` with this worker in one transaction (the
        marker: the first member's partition id, the same on every member's row); the members
        now proving, in order."""
        asked: list[WorkItem] = []
        for item in items:
            out = self.book.post(item, self.taken(item))
            if out == [lc.Record(P.GPU)]:
                asked.append(item)
            else:
                self.book.carry(item, out)  # it ended while it waited (cancelled): let it go
        if not asked:
            return []
        answers = self.book.record_batch(asked, P.GPU, worker=self.row, gpu_started_at=timezone.now(),
                                         batch=str(asked[0].claim.partition_id))
        proving = []
        for item, answer in zip(asked, answers, strict=True):
            out = self.book.post(item, answer)
            if out == [lc.Launch()]:
                proving.append(item)
            else:
                self.book.carry(item, out)
        return proving

    def launch_batch(self, items: list[WorkItem]) -> list[WorkItem]:
        """The members' proofs launched (and finished, without split) together, each member then
        carried on alone (recorded finalizing, handed to a finalizer); returns those that were.
        A batch-wide error is retried member by member, so a member whose witness is bad fails
        alone with its own reason and the others still prove."""
        if not items:
            return []
        api = prover

        def abandoned() -> bool:
            return all(item.abandoned() for item in items)

        events: list[lc.Event]
        refused = self.hold_device(items)
        if refused is not None:
            events = [refused] * len(items)
        else:
            try:
                staged = api.gpu_prove_stage_batch(items[0].key, [item.synthesized.assignment for item in items
                                                                  if item.synthesized is not None], self.device)
                with self.lock:
                    t0 = time.perf_counter()
                    try:
                        pendings = api.gpu_prove_launch_batch(staged, abort=abandoned)
                        for item, pending in zip(items, pendings, strict=True):
                            assert item.launch is not None
                            item.launch.pending = pending
                            if self.whole:
                                item.launch.proof = api.gpu_prove_finish(pending)
                    finally:
                        elapsed = time.perf_counter() - t0
                        self.busy_s += elapsed
                        for item in items:
                            assert item.launch is not None
                            item.launch.seconds = elapsed / len(items)
                events = [lc.Abandoned() if item.abandoned() else lc.Launched() for item in items]
            except ProofAborted:
                self.stage.device_done(items)
                events = [lc.Abandoned()] * len(items)
            except Exception as exc:  # one member's assignment (or the device): each alone finds out which
                self.stage.device_done(items)  # each member alone holds its own
                log.warning("%s: a batch of %d failed (%s: %s); proving its members one by one", self.name,
                            len(items), type(exc).__name__, exc)
                events = [self.launch_one(item) for item in items]
        done = []
        for item, event in zip(items, events, strict=True):
            if isinstance(event, lc.Abandoned):
                self.stage.device_done([item])
            self.book.run(item, event)
            if item.state.phase in (lc.Phase.FINISHING, lc.Phase.RECORDING, lc.Phase.DONE):
                done.append(item)
        return done

    # -- device memory ------------------------------------------------------------------------

    def hold_device(self, items: list[WorkItem]) -> lc.Event | None:
        """Reserve the launch's device memory (and its key's bases, if not resident) before it
        starts, blocking until it fits; the event that ends the items if it never can or they
        were abandoned meanwhile. Nothing to hold on the CPU."""
        memory = self.device_memory
        if memory is None:
            return None
        first = items[0]
        try:
            memory.hold(self.device, first.circuit_id, first.key, partition_owner(first.kind, first.job_id),
                        [item.claim.partition_id for item in items],
                        cancelled=lambda: all(item.abandoned() for item in items),
                        keep_bases=first.source.shares_key)  # a client's own zkey is read per job
        except MemoryBudgetError as exc:
            return lc.Failed(str(exc), retryable=False)
        except InterruptedError:
            return lc.Abandoned()
        return None

    def utilisation(self) -> float:
        wall = time.perf_counter() - self.started
        return self.busy_s / wall if wall > 0 else 0.0
