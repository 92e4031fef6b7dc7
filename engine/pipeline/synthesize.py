"""Synthesize: reserved partitions become assignments on real cores.

The lifecycle's ``Record synthesizing``, ``Synthesize`` and ``Record synth_done`` are carried
out here: the partition goes to a synthesis process (a built-in kind runs its circuit on the
job's inputs; a circom circuit's assignment comes from the client's witness, or from the
witness its generator computes from the request's inputs, under the partition's reservation
and a budget of instructions and time), which writes the assignment into the partition's
shared blocks (engine.pipeline.handover: no arrays pickled back). Each process
keeps one built-in circuit's compiled matrices for its next partitions; the engine reserves
them under "compiled <circuit> in synthesis-<n>" before that process first synthesizes the
circuit, and gives them back when it moves to another circuit. Before that first partition
reserves anything else the process loads the circuit, compiling it into the matrices cache if
the cache lacks it, under a reservation of that first use's peak
(engine.circuits.compiled.first_use_bytes), which then shrinks to what it keeps. The collector
thread posts what became of each (``Synthesized`` or ``Failed``: an error the inputs or the
circuit cause is not retried). A process that dies (killed for memory, crashed) fails its
partition as retryable, and a new process takes its place, so the engine keeps synthesizing
on every slot.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from engine.format import fmt_bytes
from engine.pipeline import lifecycle as lc
from engine.pipeline import synthesis_process
from engine.pipeline.inflight import InFlight
from engine.pipeline.memory import MemoryManager, Reservation
from engine.pipeline.process_slot import ProcessSlot
from engine.pipeline.work import CircuitSource, NotPrepared, SynthOutput, WorkItem, public_inputs_of
from engine.states import PartitionState
from engine.status.holdings import compiled_owner

log = logging.getLogger("engine.synthesize")
P = PartitionState


def new_slot(nice: int = 0) -> ProcessSlot:
    """A synthesis process that ends with the engine, kill -9 included (see
    synthesis_process.die_with).

    The kernel's death signal is tied to the spawning thread; the engine makes its processes from
    the thread that builds the stage and warms it up (Engine.start), which lives as long as the
    engine only when it is the main thread, so elsewhere the processes rely on their watcher alone.
    """
    kernel_tied = threading.current_thread() is threading.main_thread()
    return ProcessSlot((os.getpid(), kernel_tied, nice))


def first_use_nbytes(circuit_id: str, charge_processes: bool) -> tuple[int, int]:
    """What a process takes while it first uses a circuit's compiled matrices, and keeps after."""
    from engine.circuits.compiled import CHILD_BASE, first_use_bytes
    from engine.circuits.kinds import parse_circuit_id

    return first_use_bytes(parse_circuit_id(circuit_id), CHILD_BASE if charge_processes else 0)


class Synthesis:
    """One slot per synthesis process (engine.pipeline.process_slot), so the engine knows which
    process takes a partition and so which holds which circuit's compiled matrices. A partition
    goes to a free process already holding its circuit if there is one.
    Without ``memory`` (a bare test) the matrices are not reserved; ``charge_processes`` counts
    a compiling child's interpreter, as the engine counts its processes at rest."""

    def __init__(self, book: InFlight, concurrency: int, witness_seconds: float = 60.0,
                 memory: MemoryManager | None = None, charge_processes: bool = True, nice: int = 0) -> None:
        self.charge_processes = charge_processes
        self.nice = nice  # how much lower the processes run than the engine's threads
        self.book = book
        self.witness_seconds = witness_seconds
        self.concurrency = concurrency
        self.memory = memory
        self.slots = [new_slot(nice) for _ in range(concurrency)]
        self.busy = [False] * concurrency
        # what each process keeps: (circuit id, the reservation of its compiled matrices)
        self.compiled: list[tuple[str, Reservation] | None] = [None] * concurrency
        self.active = 0
        # Set by kill and stop: a process found dead then is not replaced (a process spawned as
        # the engine exits at once read its start-up data from a pipe already closed, and
        # printed that traceback on the operator's terminal).
        self._ending = False
        # Guards busy, active and a dead slot's replacement; notified when a process is
        # freed or the pacer's count moves.
        self._changed = threading.Condition()
        self._done: queue.Queue[tuple[WorkItem, Future[Any], int, datetime] | None] = queue.Queue()

    def warm_up(self) -> None:
        """Have every synthesis process up now, so the first partition does not pay their start."""
        for f in [slot.submit(synthesis_process.nothing) for slot in self.slots]:
            f.result()

    def pids(self) -> list[int]:
        """The synthesis processes' ids."""
        return [pid for slot in self.slots if (pid := slot.pid) is not None]

    def has_room(self, waiting_for_proof: int, pace_target: int, ahead: int = 0) -> bool:
        """A free process, and not too much synthesized work already waiting (the pacer),
        with ``ahead`` partitions more claimed ahead and waiting; waits a little for one
        otherwise."""
        with self._changed:
            if self.active >= self.concurrency or self.active + ahead + waiting_for_proof >= pace_target:
                self._changed.wait(0.2)
                return False
        return True

    def may_claim(self, waiting_for_proof: int, pace_target: int, ahead: int) -> bool:
        """Room to claim one more: a free slot, or one partition ahead per busy process, within
        the pacer's target; waits a little otherwise."""
        with self._changed:
            if self.active + ahead >= 2 * self.concurrency or self.active + ahead + waiting_for_proof >= pace_target:
                self._changed.wait(0.2)
                return False
        return True

    def spare(self, waiting_for_proof: int, pace_target: int) -> int:
        """How many more partitions has_room would let in now."""
        with self._changed:
            return max(0, min(self.concurrency - self.active, pace_target - self.active - waiting_for_proof))

    def nudge(self) -> None:
        """The pacer's count moved (a worker took a synthesized partition off the proof queue):
        a claim or start waiting on it looks again now rather than at the end of its wait (on a
        device that proves a tiny partition in 40 ms, that wait left the device idle)."""
        with self._changed:
            self._changed.notify_all()

    def prepare(self, item: WorkItem) -> int:
        """The process that will synthesize ``item``, its compiled matrices reserved (reserve
        asks, before the item reserves its key and memory: a first compile's peak may need a
        key evicted, and must never wait behind the item's own reservation). Raises what a
        reservation raises (MemoryBudgetError, InterruptedError) or NotPrepared."""
        process = self._pick(item)
        self._renew_if_dead(process)
        self._hold_compiled(item, process)
        return process

    def record_started(self, item: WorkItem, instruction: lc.Record) -> lc.Event:
        """Synthesizing from the moment that is written (not from before a wait for the writer)."""
        assert item.held is not None
        return self.book.record(item, P.SYNTHESIZING, written_at=("synth_started_at",),
                                reserved_bytes=item.held.reservation.nbytes)

    def record_done(self, item: WorkItem, instruction: lc.Record) -> lc.Event:
        """Synthesized at the moment its process was done with it."""
        finished = item.synthesized.finished_at if item.synthesized is not None else None
        return self.book.record(item, P.SYNTH_DONE, synth_finished_at=finished or timezone.now())

    def synthesize(self, item: WorkItem, instruction: lc.Synthesize) -> None:
        """Submit ``item`` (reserved, its process prepared) to its process; the collector
        posts what became of it."""
        held = item.held
        assert held is not None
        process = held.slot if held.slot is not None else self._pick(item)
        with self._changed:
            self.active += 1
            self.busy[process] = True
        slot = self.slots[process]
        spec = held.blocks.spec if held.blocks is not None else None
        future: Future[Any]
        try:
            if item.source is CircuitSource.BUILTIN:
                future = slot.submit(synthesis_process.synthesize_builtin, item.circuit_id, item.inputs, item.index,
                                     spec)
            else:
                # the client's generator may use what the partition reserved, no more
                future = slot.submit(synthesis_process.synthesize_circom, item.upload_dir, held.reservation.nbytes,
                                     self.witness_seconds, spec)
        except BrokenProcessPool as exc:  # it died since prepare: the collector fails the item, renews it
            future = Future()
            future.set_exception(exc)
        # the process is free before the collector may let the next partition in; the answer's
        # arrival, taken here on the slot's reader thread, bounds the synthesis's recorded end
        future.add_done_callback(lambda f: self._free(process))
        future.add_done_callback(lambda f: self._done.put((item, f, process, timezone.now())))

    def _pick(self, item: WorkItem) -> int:
        """A free process, one that already holds the item's compiled circuit first."""
        with self._changed:
            free = [i for i in range(self.concurrency) if not self.busy[i]] or list(range(self.concurrency))
            holding = [i for i in free if (self.compiled[i] or ("",))[0] == item.circuit_id]
            return (holding or free)[0]

    def _free(self, process: int) -> None:
        with self._changed:
            self.busy[process] = False

    def _renew_if_dead(self, process: int) -> None:
        """A process that died (killed for memory, crashed) breaks its slot for
        good: a new process takes its place, and what the engine reserved for the dead one's
        compiled matrices is given back (its next circuit is reserved again, as for any
        process). Called from the engine's own threads, which may write the host's row."""
        with self._changed:
            if not self.slots[process].broken or self._ending:
                return
            self.slots[process] = new_slot(self.nice)
            held, self.compiled[process] = self.compiled[process], None
        if held is not None:
            held[1].release()
        log.warning("synthesis-%d died; a new process takes its place", process + 1)

    def _hold_compiled(self, item: WorkItem, process: int) -> None:
        """Give ``process`` a built-in item's compiled circuit, unless it holds it already: what it
        kept for another circuit is given back, the first use's bytes are reserved (a compile's
        peak where the matrices cache lacks the circuit), the process loads the circuit (reading
        the cache, or compiling into it), and the reservation shrinks to what it keeps. All of it
        before the item reserves its key and memory, so a compile's peak never waits behind them
        and may evict an idle key. Raises MemoryBudgetError when the bytes can never fit,
        InterruptedError when the item was cancelled while waiting, NotPrepared when the compile
        failed."""
        if self.memory is None or item.source is not CircuitSource.BUILTIN:
            return
        held = self.compiled[process]
        if held is not None and held[0] == item.circuit_id:
            return
        if held is not None:  # dropped by the process before its bytes are given back
            try:
                self.slots[process].submit(synthesis_process.drop_circuits).result()
            except BrokenProcessPool:
                self._renew_if_dead(process)  # gone with the process, and given back
            else:
                held[1].release()
                self.compiled[process] = None
        nbytes, kept = first_use_nbytes(item.circuit_id, self.charge_processes)
        reservation = self.memory.acquire(compiled_owner(item.circuit_id, process), nbytes, item.priority,
                                          cancelled=item.abandoned)
        if nbytes > kept:
            log.info("synthesis-%d compiles %s (the matrices cache lacks it) under %s reserved", process + 1,
                     item.circuit_id, fmt_bytes(nbytes))
        try:
            seconds = self.slots[process].submit(synthesis_process.load_circuit, item.circuit_id).result()
        except Exception as exc:  # the compile failed, or the process died
            reservation.release()
            self._renew_if_dead(process)
            raise NotPrepared(f"compiling {item.circuit_id}: {type(exc).__name__}: {exc}",
                              retryable=not _deterministic(exc)) from exc
        reservation.release_part(nbytes - kept)
        self.compiled[process] = (item.circuit_id, reservation)
        log.info("synthesis-%d keeps %s's compiled matrices (%s reserved), loaded in %.1fs", process + 1,
                 item.circuit_id, fmt_bytes(kept), seconds)

    # -- collector -------------------------------------------------------------------------

    def collect_one(self) -> bool:
        """The collector thread's step: one finished synthesis recorded; False once stopped."""
        entry = self._done.get()
        if entry is None:
            return False
        item, future, process, arrived = entry
        try:
            self._renew_if_dead(process)
            self.collect(item, future, arrived)
        finally:
            # The slot is free only once the partition is recorded out of synthesizing: freed
            # before, a third partition was claimed and recorded synthesizing first, and the
            # records said "3/2 active" for a moment.
            with self._changed:
                self.active -= 1
                self._changed.notify_all()
        return True

    def collect(self, item: WorkItem, future: Future[Any], arrived: datetime | None = None) -> None:
        """Post what became of ``item``'s synthesis (its answer back at ``arrived``): its
        assignment read where the process wrote it (views over the partition's blocks), or why
        it failed."""
        event: lc.Event
        try:
            written = future.result()
            assert item.held is not None and item.held.blocks is not None
            assignment = item.held.blocks.assignment(written)
            item.synthesized = SynthOutput(assignment, public_inputs_of(assignment.public_inputs), written.seconds,
                                           _finished(written, arrived))
            event = lc.Synthesized()
        except Exception as exc:  # the circuit refused the inputs, or the process died
            event = lc.Failed(item.public_reason(f"synthesis failed: {type(exc).__name__}: {exc}"),
                              retryable=not _deterministic(exc))
        self.book.run(item, event)
        if item.synthesized is not None and item.state.phase is lc.Phase.WAITING:
            log.debug("synthesized %s in %.3fs", item.label, item.synthesized.seconds, extra=self.book.about(item))

    def kill(self) -> None:
        """End every synthesis process at once (the engine stops now: their partitions are
        already handed back, and the process exits next without waiting for them)."""
        with self._changed:
            self._ending = True
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        with self._changed:
            self._ending = True
        self._done.put(None)
        for slot in self.slots:
            slot.shutdown(wait=True, cancel=True)
        # What finished after the collector left (the engine stopping) is still posted: each such
        # partition ends and gives its memory and blocks back.
        collector_told = False
        while True:
            try:
                entry = self._done.get_nowait()
            except queue.Empty:
                break
            if entry is None:  # the collector has not got there yet: it still must
                collector_told = True
                continue
            item, future, _, arrived = entry
            self.collect(item, future, arrived)
        if collector_told:
            self._done.put(None)
        for held in self.compiled:
            if held is not None:
                held[1].release()
        self.compiled = [None] * self.concurrency


def _finished(written: Any, arrived: datetime | None) -> datetime | None:
    """When the process was done with a synthesis, by its own clock (the machine's), never
    after its answer arrived."""
    if not written.finished_at:
        return arrived
    finished = datetime.fromtimestamp(written.finished_at, tz=UTC)
    return min(finished, arrived) if arrived is not None else finished


def _deterministic(exc: BaseException) -> bool:
    """Errors another attempt cannot fix: the inputs or the circuit are wrong."""
    from concurrent.futures.process import BrokenProcessPool

    return not isinstance(exc, BrokenProcessPool | OSError | MemoryError)
