"""Reserve: before a partition is synthesized, everything it will hold is held for it; and
given back, each thing exactly once, when the lifecycle says so.

``Reserve``: the synthesis process that will take it gets its circuit's compiled matrices
first (reserved before the partition's own bytes, so a compile's peak never waits behind
them), its proving key is checked out of the host's key cache (a built-in kind's or a
registered circuit's), its memory reserved from the circuit's real needs, blocking until the
bytes fit (memory is the back-pressure that keeps a host from taking more than it can prove),
and its shared blocks lent by the engine's block pool (whose bytes they are) or made inside
that reservation (engine.pipeline.block_pool, engine.pipeline.handover). A client's uploaded
zkey is read only inside the job's reservation, so its bytes are counted.

``Release``: the a/b/c block and its share of the memory once the device has them, the rest
(the witness block, the memory, the key) when the partition ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError

from engine.format import fmt_bytes
from engine.pipeline import lifecycle as lc
from engine.pipeline.block_pool import BlockPool
from engine.pipeline.handover import Blocks
from engine.pipeline.inflight import InFlight
from engine.pipeline.keycache import KeyCache
from engine.pipeline.keys import KeyRefused
from engine.pipeline.memory import MemoryBudgetError, MemoryManager
from engine.pipeline.work import CircuitSource, Held, NotPrepared, WorkItem
from engine.status.holdings import held_for_good, partition_owner

log = logging.getLogger("engine.reserve")


def _check_fits_with_key(item: WorkItem, key_bytes: int, memory: MemoryManager) -> None:
    """A partition whose memory cannot fit beside its own key and what the engine holds for
    good (its processes at rest, the synthesis processes' compiled matrices) would wait for ever
    (none of it is evictable while it waits): fail it now, saying so."""
    engine = memory.held_by(held_for_good)
    if key_bytes + item.partition_bytes + engine > memory.budget:
        beside = f" and the engine's own {fmt_bytes(engine)} (processes at rest, compiled matrices)" if engine else ""
        raise MemoryBudgetError(
            f"{item.label} needs {fmt_bytes(item.partition_bytes)} beside its proving key's {fmt_bytes(key_bytes)}"
            f"{beside}, more than the whole memory budget of {fmt_bytes(memory.budget)}; raise "
            f"PROVINGSITE_MEMORY_BUDGET (runengine --budget) or set PROVINGSITE_FIXED_BASE=0 to keep keys without "
            f"their tables")


class Reservations:
    """The Reserve and Release instructions' executor."""

    def __init__(self, book: InFlight, keycache: KeyCache, memory: MemoryManager, stopping: threading.Event,
                 prepare: Callable[[WorkItem], int | None] = lambda item: None, pool: BlockPool | None = None) -> None:
        self.book = book
        self.keycache = keycache
        self.memory = memory
        self.stopping = stopping
        # Lends each partition its blocks, pages allocated, from what earlier ones let go; without
        # it a partition makes its own inside its reservation.
        self.pool = pool
        # The synthesis process that will take the item, its circuit's compiled matrices held
        # (engine.pipeline.synthesize.Synthesis.prepare); raises NotPrepared, MemoryBudgetError,
        # InterruptedError like a reservation.
        self.prepare = prepare

    def reserve(self, item: WorkItem, instruction: lc.Reserve) -> lc.Event:
        """Hold the item's key, memory and blocks: ``Reserved``, or why not. A database error
        (the key's farm check reads the records) gives back what was held and goes up: the
        dispatcher reserves the item again once the database is back."""
        started = time.monotonic()
        key = vk = reservation = blocks = None
        checked_out = False
        try:
            slot = self.prepare(item)
            if item.source.shares_key:
                key = self.keycache.checkout(item.circuit_id, item.key_bytes, item.priority)
                checked_out = True
                if item.source is CircuitSource.REGISTERED:  # its vk is the cached key's
                    vk = key.vk
                _check_fits_with_key(item, self.keycache.reserved_bytes(item.circuit_id), self.memory)
            owner = partition_owner(item.kind, item.job_id)
            # Whole, as if it made its blocks: a partition that could never fit does not wait.
            self.memory.check_possible(owner, item.partition_bytes)
            cancelled = lambda: item.abandoned() or self.stopping.is_set()  # noqa: E731
            if self.pool is not None:  # the pool's bytes, not the partition's
                blocks = self.pool.lend(item.sizes.witness_rows, item.sizes.domain_rows, item.priority, cancelled)
            # (0 where the sizes could not be read: reading the key fails the partition next)
            rest = max(item.partition_bytes - (blocks.kept_nbytes if blocks else 0), 0)
            reservation = self.memory.acquire(owner, rest, item.priority, cancelled=cancelled)
            if not item.source.shares_key:  # the client's own key, read once per job, inside its reservation
                from engine.prover import read_zkey

                key = read_zkey(item.zkey_path)
                vk = key.vk
            if blocks is None:
                blocks = Blocks.made(f"{item.claim.partition_id}-{item.claim.attempt}", item.sizes.witness_rows,
                                     item.sizes.domain_rows)
        except BaseException as exc:
            if blocks is not None:
                blocks.free()
            if reservation is not None:
                reservation.release()
            if checked_out:
                self.keycache.check_in(item.circuit_id)
            if isinstance(exc, DatabaseError | KeyboardInterrupt | SystemExit):
                raise
            return self._not_reserved(item, exc)
        item.held = Held(key=key, vk=vk, reservation=reservation, blocks=blocks, slot=slot)
        log.debug("reserved %s: %s of memory and its key %s, after %.3fs", item.label, fmt_bytes(item.partition_bytes),
                  item.circuit_id, time.monotonic() - started, extra=self.book.about(item))
        return lc.Reserved()

    def _not_reserved(self, item: WorkItem, exc: BaseException) -> lc.Event:
        match exc:
            case MemoryBudgetError():
                return lc.NotReserved(str(exc), lc.Outcome.FAIL)
            case InterruptedError() if self.stopping.is_set() and not item.state.cancelled:
                return lc.NotReserved(lc.STOPPING_REASON, lc.Outcome.HAND_BACK)  # for another host, or a later start
            case InterruptedError():  # cancelled while it waited: the records moved on
                return lc.NotReserved("cancelled while waiting for memory", lc.Outcome.DROP)
            case NotPrepared():
                return lc.NotReserved(item.public_reason(str(exc)), lc.Outcome.FAIL, retryable=exc.retryable)
            case KeyRefused():  # another host with the farm's key proves it: hand it back
                log.error("refusing to prove %s on this host: %s", item.circuit_id, exc, extra=self.book.about(item))
                self.keycache.refuse(item.circuit_id, str(exc))
                return lc.NotReserved(f"handed back: this host refuses {item.circuit_id} ({exc})",
                                      lc.Outcome.HAND_BACK)
        # a missing or corrupt key, a failed setup: say which and why
        log.error("cannot prepare %s", item.label, exc_info=exc, extra=self.book.about(item))
        return lc.NotReserved(item.public_reason(f"preparing {item.circuit_id}: {exc}"), lc.Outcome.FAIL)

    def release(self, item: WorkItem, instruction: lc.Release) -> None:
        """Give back what the lifecycle says is no longer needed: the a/b/c block and its
        share alone (the device has them), or everything left."""
        held = item.held
        if held is None:
            return
        if instruction.holds == {lc.Hold.ABC}:
            kept = 0
            if held.blocks is not None:
                kept = held.blocks.abc_kept_nbytes  # the pool's bytes: never the partition's to give
                held.blocks.free_abc()
            held.reservation.release_part(item.abc_bytes - kept)
            return
        if held.blocks is not None:
            held.blocks.free()
        held.reservation.release()
        if lc.Hold.KEY in instruction.holds and held.key is not None and item.source.shares_key:
            self.keycache.check_in(item.circuit_id)
        item.held = None
