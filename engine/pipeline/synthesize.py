"""Synthesize: reserved partitions become assignments on real cores.

``start`` records ``synthesizing`` and submits the partition to a pool of processes (a
built-in kind runs its circuit on the job's inputs; a circom circuit's assignment comes from
the client's witness, or from the witness its generator computes from the request's inputs,
under the partition's reservation and a budget of instructions and time). Each pool process
keeps one built-in circuit's compiled matrices for its next partitions; the engine reserves
them under "compiled <circuit> in synthesis-<n>" before that process first synthesizes the
circuit, and gives them back when it moves to another circuit. Before that first partition
reserves anything else the process loads the circuit, compiling it into the matrices cache if
the cache lacks it, under a reservation of that first use's peak
(engine.circuits.compiled.first_use_bytes), which then shrinks to what it keeps. The collector
thread records ``synth_done`` and hands the item to the proving queue, or fails it: an error
the inputs or the circuit cause is not retried. A process that dies (killed for memory,
crashed) fails its partition as retryable, and a new process takes its place, so the engine
keeps synthesizing on every slot.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from django.utils import timezone

from engine.format import fmt_bytes
from engine.pipeline import synthesis_process
from engine.pipeline.inflight import InFlight
from engine.pipeline.memory import MemoryBudgetError, MemoryManager, Reservation
from engine.pipeline.prove import ProofQueue
from engine.pipeline.work import CircuitSource, WorkItem, public_inputs_of
from engine.states import PartitionState
from engine.status.holdings import compiled_owner

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


def first_use_nbytes(circuit_id: str, charge_processes: bool) -> tuple[int, int]:
    """What a process takes while it first uses a circuit's compiled matrices, and keeps after."""
    from engine.circuits.compiled import CHILD_BASE, first_use_bytes
    from engine.circuits.kinds import parse_circuit_id

    return first_use_bytes(parse_circuit_id(circuit_id), CHILD_BASE if charge_processes else 0)


class Synthesis:
    """One single-process pool per synthesis process, so the engine knows which process takes a
    partition and so which holds which circuit's compiled matrices (a shared pool hands work to
    any process). A partition goes to a free process already holding its circuit if there is one.
    Without ``memory`` (a bare test) the matrices are not reserved; ``charge_processes`` counts
    a compiling child's interpreter, as the engine counts its processes at rest."""

    def __init__(self, book: InFlight, outbox: ProofQueue, concurrency: int, witness_seconds: float = 60.0,
                 memory: MemoryManager | None = None, charge_processes: bool = True) -> None:
        self.charge_processes = charge_processes
        self.book = book
        self.witness_seconds = witness_seconds
        self.outbox = outbox
        self.concurrency = concurrency
        self.memory = memory
        self.pools = [new_pool(1) for _ in range(concurrency)]
        self.busy = [False] * concurrency
        # what each process keeps: (circuit id, the reservation of its compiled matrices)
        self.compiled: list[tuple[str, Reservation] | None] = [None] * concurrency
        self.active = 0
        self._slots = threading.Condition()
        self._done: queue.Queue[tuple[WorkItem, Future[Any], int] | None] = queue.Queue()

    def warm_up(self) -> None:
        """Start every pool process now, so the first partition does not pay their start."""
        for f in [pool.submit(synthesis_process.nothing) for pool in self.pools]:
            f.result()

    def pids(self) -> list[int]:
        """The pool processes' ids (started by warm_up)."""
        return [pid for pool in self.pools for pid in (getattr(pool, "_processes", None) or {})]

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

    def prepare(self, item: WorkItem) -> int | None:
        """The process that will synthesize ``item``, its compiled matrices reserved; None (the
        item failed or dropped, freed) if they cannot be. Called before the item reserves its
        key and memory: a first compile's peak may need a key evicted, and must never wait
        behind the item's own reservation."""
        process = self._pick(item)
        self._renew_if_dead(process)
        return process if self._hold_compiled(item, process) else None

    def start(self, item: WorkItem, process: int) -> None:
        """Submit ``item`` (reserved) to ``process`` (from prepare)."""
        if not self.book.record(item, P.SYNTHESIZING, synth_started_at=timezone.now(),
                                reserved_bytes=item.reservation.nbytes):
            return  # cancelled (or fenced) since the claim: record() has freed what it held
        with self._slots:
            self.active += 1
            self.busy[process] = True
        item.timings["synth_submitted"] = time.perf_counter()
        pool = self.pools[process]
        future: Future[Any]
        try:
            if item.source is CircuitSource.BUILTIN:
                future = pool.submit(synthesis_process.synthesize_builtin, item.circuit_id, item.inputs, item.index)
            else:
                # the client's generator may use what the partition reserved, no more
                future = pool.submit(synthesis_process.synthesize_circom, item.upload_dir, item.reservation.nbytes,
                                     self.witness_seconds)
        except BrokenProcessPool as exc:  # it died since prepare: the collector fails the item, renews it
            future = Future()
            future.set_exception(exc)
        # the process is free before the collector may let the next partition in
        future.add_done_callback(lambda f: self._free(process))
        future.add_done_callback(lambda f: self._done.put((item, f, process)))

    def _pick(self, item: WorkItem) -> int:
        """A free process, one that already holds the item's compiled circuit first."""
        with self._slots:
            free = [i for i in range(self.concurrency) if not self.busy[i]] or list(range(self.concurrency))
            holding = [i for i in free if (self.compiled[i] or ("",))[0] == item.circuit_id]
            return (holding or free)[0]

    def _free(self, process: int) -> None:
        with self._slots:
            self.busy[process] = False

    def _renew_if_dead(self, process: int) -> None:
        """A process that died (killed for memory, crashed) breaks its single-process pool for
        good: a new process takes its place, and what the engine reserved for the dead one's
        compiled matrices is given back (its next circuit is reserved again, as for any
        process). Called from the engine's own threads, which may write the host's row."""
        with self._slots:
            if not getattr(self.pools[process], "_broken", False):
                return
            self.pools[process] = new_pool(1)
            held, self.compiled[process] = self.compiled[process], None
        if held is not None:
            held[1].release()
        log.warning("synthesis-%d died; a new process takes its place", process + 1)

    def _hold_compiled(self, item: WorkItem, process: int) -> bool:
        """Give ``process`` a built-in item's compiled circuit, unless it holds it already: what it
        kept for another circuit is given back, the first use's bytes are reserved (a compile's
        peak where the matrices cache lacks the circuit), the process loads the circuit (reading
        the cache, or compiling into it), and the reservation shrinks to what it keeps. All of it
        before the item reserves its key and memory, so a compile's peak never waits behind them
        and may evict an idle key. False (the item failed or dropped, freed) when the bytes can
        never fit, the compile failed, or the item was cancelled while waiting."""
        if self.memory is None or item.source is not CircuitSource.BUILTIN:
            return True
        held = self.compiled[process]
        if held is not None and held[0] == item.circuit_id:
            return True
        if held is not None:  # dropped by the process before its bytes are given back
            try:
                self.pools[process].submit(synthesis_process.drop_circuits).result()
            except BrokenProcessPool:
                self._renew_if_dead(process)  # gone with the process, and given back
            else:
                held[1].release()
                self.compiled[process] = None
        try:
            nbytes, kept = first_use_nbytes(item.circuit_id, self.charge_processes)
            reservation = self.memory.acquire(compiled_owner(item.circuit_id, process), nbytes, item.priority,
                                              cancelled=lambda: item.dropped)
        except MemoryBudgetError as exc:
            self.book.fail(item, str(exc), retryable=False)
            return False
        except InterruptedError:
            self.book.drop(item)
            return False
        if nbytes > kept:
            log.info("synthesis-%d compiles %s (the matrices cache lacks it) under %s reserved", process + 1,
                     item.circuit_id, fmt_bytes(nbytes))
        try:
            seconds = self.pools[process].submit(synthesis_process.load_circuit, item.circuit_id).result()
        except Exception as exc:  # the compile failed, or the process died
            reservation.release()
            self._renew_if_dead(process)
            self.book.fail(item, item.public_reason(f"compiling {item.circuit_id}: {type(exc).__name__}: {exc}"),
                           retryable=not _deterministic(exc))
            return False
        reservation.release_part(nbytes - kept)
        self.compiled[process] = (item.circuit_id, reservation)
        log.info("synthesis-%d keeps %s's compiled matrices (%s reserved), loaded in %.1fs", process + 1,
                 item.circuit_id, fmt_bytes(kept), seconds)
        return True

    # -- collector -------------------------------------------------------------------------

    def collect_one(self) -> bool:
        """The collector thread's step: one finished synthesis recorded; False once stopped."""
        entry = self._done.get()
        if entry is None:
            return False
        item, future, process = entry
        try:
            self._renew_if_dead(process)
            self.collect(item, future)
        finally:
            # The slot is free only once the partition is recorded out of synthesizing: freed
            # before, a third partition was claimed and recorded synthesizing first, and the
            # records said "3/2 active" for a moment.
            with self._slots:
                self.active -= 1
                self._slots.notify_all()
        return True

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
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=True)
        for held in self.compiled:
            if held is not None:
                held[1].release()
        self.compiled = [None] * self.concurrency


def _deterministic(exc: BaseException) -> bool:
    """Errors another attempt cannot fix: the inputs or the circuit are wrong."""
    from concurrent.futures.process import BrokenProcessPool

    return not isinstance(exc, BrokenProcessPool | OSError | MemoryError)
