"""Synthesize: reserved partitions become assignments on real cores.

``start`` records ``synthesizing`` and submits the partition to a pool of processes (a
built-in kind runs its circuit on the job's inputs; a circom circuit's assignment comes from
the client's witness, or from the witness its generator computes from the request's inputs,
under the partition's reservation and a budget of instructions and time). The collector
thread records ``synth_done`` and hands the item to the proving queue, or fails it: an error
the inputs or the circuit cause is not retried.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from django.utils import timezone

from engine.pipeline import synthesis_process
from engine.pipeline.inflight import InFlight
from engine.pipeline.prove import ProofQueue
from engine.pipeline.work import CircuitSource, WorkItem, public_inputs_of
from engine.states import PartitionState

log = logging.getLogger("engine.synthesize")
P = PartitionState


def new_pool(concurrency: int) -> ProcessPoolExecutor:
    """Processes that end with the engine, kill -9 included (see synthesis_process.die_with).

    The kernel's death signal is tied to the spawning thread; the pool spawns from the thread
    that builds it and warms it up (Engine.start), which lives as long as the engine only when it
    is the main thread, so elsewhere the workers rely on their watcher alone.
    """
    kernel_tied = threading.current_thread() is threading.main_thread()
    return ProcessPoolExecutor(max_workers=concurrency, mp_context=multiprocessing.get_context("spawn"),
                               initializer=synthesis_process.init_worker, initargs=(os.getpid(), kernel_tied))


class Synthesis:
    def __init__(self, book: InFlight, outbox: ProofQueue, concurrency: int, witness_seconds: float = 60.0) -> None:
        self.book = book
        self.witness_seconds = witness_seconds
        self.outbox = outbox
        self.concurrency = concurrency
        self.pool = new_pool(concurrency)
        self.active = 0
        self._slots = threading.Condition()
        self._done: queue.Queue[tuple[WorkItem, Future[Any]] | None] = queue.Queue()

    def warm_up(self) -> None:
        """Start every pool process now, so the first partition does not pay their start."""
        for f in [self.pool.submit(synthesis_process.nothing) for _ in range(self.concurrency)]:
            f.result()

    def has_room(self, waiting_for_proof: int, pace_target: int) -> bool:
        """A free pool slot, and not too much synthesized work already waiting (the pacer);
        waits a little for one otherwise."""
        with self._slots:
            if self.active >= self.concurrency or self.active + waiting_for_proof >= pace_target:
                self._slots.wait(0.2)
                return False
        return True

    def spare(self, waiting_for_proof: int, pace_target: int) -> int:
        """How many more partitions has_room would let in now."""
        with self._slots:
            return max(0, min(self.concurrency - self.active, pace_target - self.active - waiting_for_proof))

    def start(self, item: WorkItem) -> None:
        if not self.book.record(item, P.SYNTHESIZING, synth_started_at=timezone.now(),
                                reserved_bytes=item.reservation.nbytes):
            return  # cancelled (or fenced) since the claim: record() has freed what it held
        with self._slots:
            self.active += 1
        item.timings["synth_submitted"] = time.perf_counter()
        if item.source is CircuitSource.BUILTIN:
            future = self.pool.submit(synthesis_process.synthesize_builtin, item.circuit_id, item.inputs, item.index)
        else:
            # the client's generator may use what the partition reserved, no more
            future = self.pool.submit(synthesis_process.synthesize_circom, item.upload_dir, item.reservation.nbytes,
                                      self.witness_seconds)
        future.add_done_callback(lambda f: self._done.put((item, f)))

    # -- collector -------------------------------------------------------------------------

    def collect_forever(self) -> None:
        while True:
            entry = self._done.get()
            if entry is None:
                return
            item, future = entry
            try:
                self.collect(item, future)
            finally:
                # The slot is free only once the partition is recorded out of synthesizing:
                # freed before, a third partition was claimed and recorded synthesizing first,
                # and the records said "3/2 active" for a moment.
                with self._slots:
                    self.active -= 1
                    self._slots.notify_all()

    def collect(self, item: WorkItem, future: Future[Any]) -> None:
        book = self.book
        try:
            item.assignment, item.timings["synth_s"] = future.result()
        except Exception as exc:  # the circuit refused the inputs, or the process died
            book.fail(item, item.public_reason(f"synthesis failed: {type(exc).__name__}: {exc}"),
                      retryable=not _deterministic(exc))
            return
        if item.dropped:
            book.drop(item)
            return
        item.publics = public_inputs_of(item.assignment.public_inputs)
        if book.record(item, P.SYNTH_DONE, synth_finished_at=timezone.now()):
            log.debug("synthesized %s in %.3fs", item.label, item.timings["synth_s"], extra=book.about(item))
            self.outbox.put(item)

    def stop(self) -> None:
        self._done.put(None)
        self.pool.shutdown(wait=True, cancel_futures=True)


def _deterministic(exc: BaseException) -> bool:
    """Errors another attempt cannot fix: the inputs or the circuit are wrong."""
    from concurrent.futures.process import BrokenProcessPool

    return not isinstance(exc, BrokenProcessPool | OSError | MemoryError)
