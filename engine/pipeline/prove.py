"""Prove: proving workers, N per device, one lock per device around kernel submission.

The split that makes the GPU never wait for CPU-side finishing work:

    take the next synthesized partition (oldest job's lowest partition first)
    record gpu (with this worker) → launch the kernels → record finalizing
    release the a/b/c share of the partition's memory
    hand the pending proof to a finalizer → take the next one

A worker's card is derived from the records ("proving" iff some partition is in ``gpu``
with that worker), and a worker moves its partition out of ``gpu`` itself before taking
the next, so the seed system's stale "idle" card cannot happen: no finalizer ever writes
a worker's state.

CPU backend: the "device" is a CPU slot named ``cpu``; launching then runs the whole proof
synchronously, so the same loop and the same records serve both backends (the prover's
``gpu_prove_start`` keeps its name: it is the GPU's path, and the CPU's stand-in for it).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Any, Protocol

from django.utils import timezone

from engine import prover
from engine.models import Worker
from engine.pipeline.device_memory import DeviceMemory
from engine.pipeline.inflight import InFlight
from engine.pipeline.memory import MemoryBudgetError
from engine.pipeline.work import WorkItem
from engine.prover import ProofAborted, UnsatisfiedConstraint
from engine.states import PartitionState
from engine.status.holdings import partition_owner

log = logging.getLogger("engine.prove")
P = PartitionState


class ProofQueue:
    """Synthesized partitions waiting for a proving worker, served in claim order."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, WorkItem]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.closed = False

    def put(self, item: WorkItem) -> None:
        with self._cond:
            heapq.heappush(self._heap, (item.order, next(self._seq), item))
            self._cond.notify()

    def take(self, timeout: float = 0.5) -> WorkItem | None:
        with self._cond:
            if not self._heap and not self.closed:
                self._cond.wait(timeout)
            if not self._heap:
                return None
            return heapq.heappop(self._heap)[2]

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
                    if item.key is not None and item.key is first.key and not item.dropped:
                        self._heap.remove(entry)
                        batch.append(item)
                heapq.heapify(self._heap)
                left = deadline - time.monotonic()
                if len(batch) >= limit or left <= 0 or self.closed:
                    return batch
                self._cond.wait(left)

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


class Finishing(Protocol):
    """Where a launched proof goes to be finished (engine.pipeline.finalize.Finalizers)."""

    def submit(self, item: WorkItem) -> None: ...

    def finish(self, item: WorkItem) -> None: ...


class ProvingWorker:
    """One worker slot (W0, W1 … on a device); ``run`` is its thread's loop."""

    def __init__(self, book: InFlight, inbox: ProofQueue, finalizers: Finishing, row: Worker,
                 device_lock: threading.Lock, split: bool, batch: tuple[int, float] = (1, 0.0),
                 device_memory: DeviceMemory | None = None) -> None:
        self.book = book
        self.device_memory = device_memory  # None, or no budget for this device (the CPU): nothing held
        self.inbox = inbox
        self.finalizers = finalizers
        self.row = row
        self.device = row.device
        self.lock = device_lock
        self.split = split
        self.busy_s = 0.0  # seconds spent inside the prover (kernel submission, or the whole proof)
        self.started = time.perf_counter()
        self.current: WorkItem | None = None
        self.batch_max, self.batch_wait_s = batch

    @property
    def name(self) -> str:
        return f"{self.device} W{self.row.ordinal}"

    def step(self) -> bool:
        """The worker thread's step: the next partition (or batch) proved; False once closed."""
        item = self.inbox.take()
        if item is None:
            return not self.inbox.closed
        if self.batch_max > 1 and item.key is not None and not item.dropped:
            self.prove_batch(self.inbox.take_batch(item, self.batch_max, self.batch_wait_s))
        else:
            self.prove(item)
        return True

    def prove(self, item: WorkItem) -> None:
        """Occupy, launch, hand over: in split mode returns as soon as the kernels are launched."""
        self.current = item
        try:
            if self.occupy(item) and self.launch(item) and self.split:
                self.finalizers.submit(item)
        finally:
            self.current = None

    def occupy(self, item: WorkItem) -> bool:
        """Take the partition onto this worker: from now on the records say it proves it."""
        if item.dropped:
            self.book.drop(item)
            return False
        return self.book.record(item, P.GPU, worker=self.row, gpu_started_at=timezone.now())

    def launch(self, item: WorkItem) -> bool:
        """Launch the kernels; leave ``gpu`` (split) or finish first (no split)."""
        book = self.book
        api = prover
        abandoned = item.abandoned
        if not self.hold_device([item]):
            return False
        try:
            with self.lock:
                t0 = time.perf_counter()
                try:
                    item.pending = api.gpu_prove_start(item.key, item.assignment, self.device, abort=abandoned)
                    if not self.split:  # benchmark mode: hold the device until the proof is whole
                        item.proof = api.gpu_prove_finish(item.pending, abort=abandoned)
                finally:
                    elapsed = time.perf_counter() - t0
                    self.busy_s += elapsed
                    item.timings["gpu_s"] = elapsed
        except ProofAborted:  # cancelled or fenced while proving: free its memory now
            self.device_done([item])
            book.drop(item)
            return False
        except Exception as exc:  # a kernel or device error: another attempt may succeed
            self.device_done([item])
            log.exception("%s: proving %s failed", self.name, item.label, extra=book.about(item))
            # An unsatisfied assignment is the circuit's or the witness's: every attempt fails alike.
            book.fail(item, item.public_reason(f"proving on {self.device} failed: {type(exc).__name__}: {exc}"),
                      retryable=not isinstance(exc, UnsatisfiedConstraint))
            return False
        # Leave gpu before taking the next partition: the records never show a worker twice.
        if not book.record(item, P.FINALIZING, gpu_finished_at=timezone.now()):
            self.device_done([item])  # no finalizer will see it
            return False
        if item.reservation is not None:
            item.reservation.release_part(item.abc_bytes)  # A·w, B·w, C·w are on the device now
        item.assignment = None
        if not self.split:
            self.finalizers.finish(item)
        return True

    # -- batches: several partitions of one key in one launch ----------------------------------

    def prove_batch(self, items: list[WorkItem]) -> None:
        """Occupy all (one ledger transaction, one batch marker), launch them together, then
        each member leaves gpu and is finished on its own: one member's failure is its own."""
        if len(items) == 1:
            self.prove(items[0])
            return
        self.current = items[0]
        try:
            members = self.occupy_batch(items)
            for item in self.launch_batch(members):
                if self.split:
                    self.finalizers.submit(item)
                else:
                    self.finalizers.finish(item)
        finally:
            self.current = None

    def occupy_batch(self, items: list[WorkItem]) -> list[WorkItem]:
        live = []
        for item in items:
            if item.dropped:
                self.book.drop(item)
            else:
                live.append(item)
        if not live:
            return []
        # the marker: the first member's partition id, the same on every member's row
        return self.book.record_batch(live, P.GPU, worker=self.row, gpu_started_at=timezone.now(),
                                      batch=str(live[0].claim.partition_id))

    def launch_batch(self, items: list[WorkItem]) -> list[WorkItem]:
        """The batch's proofs launched (and finished, without split) together; returns the
        members now in finalizing. A batch-wide error is retried member by member, so a member
        whose witness is bad fails alone with its own reason and the others still prove."""
        if not items:
            return []
        book, api = self.book, prover

        def abandoned() -> bool:
            return all(item.abandoned() for item in items)

        if not self.hold_device(items):
            return []
        try:
            with self.lock:
                t0 = time.perf_counter()
                try:
                    pendings = api.gpu_prove_start_batch(items[0].key, [item.assignment for item in items],
                                                         self.device, abort=abandoned)
                    for item, pending in zip(items, pendings, strict=True):
                        item.pending = pending
                        if not self.split:
                            item.proof = api.gpu_prove_finish(pending)
                finally:
                    elapsed = time.perf_counter() - t0
                    self.busy_s += elapsed
                    for item in items:
                        item.timings["gpu_s"] = elapsed / len(items)
        except ProofAborted:
            self.device_done(items)
            for item in items:
                book.drop(item)
            return []
        except Exception as exc:  # one member's assignment (or the device): each alone finds out which
            self.device_done(items)  # each member alone holds its own
            log.warning("%s: a batch of %d failed (%s: %s); proving its members one by one", self.name, len(items),
                        type(exc).__name__, exc)
            return [item for item in items if self._launch_member_alone(item)]
        done = []
        for item in items:
            if item.abandoned():
                self.device_done([item])
                book.drop(item)
            elif self._leave_gpu(item):
                done.append(item)
            else:
                self.device_done([item])
        return done

    # -- device memory ------------------------------------------------------------------------

    def hold_device(self, items: list[WorkItem]) -> bool:
        """Reserve the launch's device memory (and its key's bases, if not resident) before it
        starts, blocking until it fits; False (the items failed or dropped) if it never can or
        they were abandoned meanwhile. Nothing to hold on the CPU."""
        memory = self.device_memory
        if memory is None:
            return True
        first = items[0]
        try:
            memory.hold(self.device, first.circuit_id, first.key, partition_owner(first.kind, first.job_id),
                        [item.claim.partition_id for item in items],
                        cancelled=lambda: all(item.abandoned() for item in items),
                        keep_bases=first.source.shares_key)  # a client's own zkey is read per job
        except MemoryBudgetError as exc:
            for item in items:
                self.book.fail(item, str(exc), retryable=False)
            return False
        except InterruptedError:
            for item in items:
                self.book.drop(item)
            return False
        return True

    def device_done(self, items: list[WorkItem]) -> None:
        """No finalizer will finish these: their share of the launch's device memory goes back now."""
        if self.device_memory is not None:
            for item in items:
                self.device_memory.finished(item.claim.partition_id)

    def _launch_member_alone(self, item: WorkItem) -> bool:
        split, self.split = self.split, True  # the batch's caller finishes it
        try:
            return self.launch(item)
        finally:
            self.split = split

    def _leave_gpu(self, item: WorkItem) -> bool:
        if not self.book.record(item, P.FINALIZING, gpu_finished_at=timezone.now()):
            return False
        if item.reservation is not None:
            item.reservation.release_part(item.abc_bytes)
        item.assignment = None
        return True

    def utilisation(self) -> float:
        wall = time.perf_counter() - self.started
        return self.busy_s / wall if wall > 0 else 0.0
