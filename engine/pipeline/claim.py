"""Claim: the dispatcher thread takes queued partitions for this host, one at a time.

It claims while the synthesis pool has a free slot, or one partition ahead per synthesis
process (claimed and loaded while the process is busy, started the moment it is free), and
not too much synthesized work already waits for a proving worker (the pacer), so a host never
hoards partitions another host could be proving. Asking with room to spare marks the host
free, which placement by key reads (engine.ledger.placement): a host holding a key keeps its
partitions while it is free.
Each claim is loaded with its circuit's memory needs into a work item, which the dispatcher
starts (``Start``: its lifecycle reserves it, records it ``synthesizing`` and hands it to a
synthesis process, engine.pipeline.lifecycle).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from django.db import DatabaseError

from engine.ledger.claims import Claim
from engine.ledger.writer import StatusWriter
from engine.pipeline import lifecycle as lc
from engine.pipeline.inflight import InFlight, Signals
from engine.pipeline.prove import ProofQueue
from engine.pipeline.synthesize import Synthesis
from engine.pipeline.work import WorkItem, load_item

log = logging.getLogger("engine.claim")


class Dispatcher:
    def __init__(self, writer: StatusWriter, book: InFlight, signals: Signals, synthesis: Synthesis,
                 proof_queue: ProofQueue, scale: str, pace_target: int,
                 refused: Callable[[], Collection[str]] = tuple) -> None:
        self.writer = writer
        self.refused = refused  # circuits this host will not prove (engine.pipeline.keycache.KeyCache.refused)
        self.book = book
        self.signals = signals
        self.synthesis = synthesis
        self.proof_queue = proof_queue
        self.scale = scale
        self.pace_target = pace_target
        self.idle_poll = 0.1
        self.unloaded: list[Claim] = []  # claimed, not yet loaded into work items
        self.unstarted: list[WorkItem] = []  # loaded, their reservation cut short by the database
        # Claimed and loaded ahead while every synthesis process is busy (one each at most), so
        # that a claim's transactions never stand between one partition's synthesis and the next.
        self.ready: list[WorkItem] = []

    def step(self) -> bool:
        """One turn of the claim loop; False once the engine stops. A database error leaves
        here for the thread's supervisor (engine.pipeline.supervise) to back off: the wake
        event is no part of that wait, so a wake set during an outage cannot make it spin."""
        signals = self.signals
        if signals.stopping.is_set():
            return False
        if self.unloaded or self.unstarted:  # held when the database failed: these first
            self.load_claimed()
            return True
        self.ready = [item for item in self.ready if not item.state.ended]  # a cancel or a stop ended these
        if self.ready:
            if self.synthesis.has_room(len(self.proof_queue), self.pace_target, ahead=len(self.ready) - 1):
                self.start(self.ready.pop(0))  # a process is free: the partition claimed ahead goes in
                return True
            if len(self.ready) >= self.synthesis.concurrency:
                return True
        if signals.draining.is_set():  # drained from the console: finish what is held, claim nothing
            if not self.ready:
                signals.queue_empty.set()
            signals.stopping.wait(self.idle_poll)
            return True
        if not self.synthesis.may_claim(len(self.proof_queue), self.pace_target, ahead=len(self.ready)) \
                or signals.stopping.is_set():
            return True
        # Room for more than this claim: the host is free, and says so for placement by key.
        free = self.synthesis.spare(len(self.proof_queue), self.pace_target) > len(self.ready) + 1
        # One at a time: each claim chooses with the queue as it is then (a deadline's job sent
        # a moment ago goes before the ones claimed next).
        claims = self.writer.claim(1, refused=self.refused())
        for claim in claims:
            self.book.hold(claim)  # its lease renewed from now on, whatever fails next
        self.unloaded.extend(claims)
        if free or not claims:
            self.writer.mark_free()
        if not claims:
            if not self.ready:
                signals.queue_empty.set()
            signals.wake.wait(self.idle_poll)
            signals.wake.clear()
            return True
        signals.queue_empty.clear()
        self.load_claimed()
        return True

    def load_claimed(self) -> None:
        """Load and start each claim taken; a claim whose job cannot be read into a work item
        (not the database's fault) fails with the reason instead of ending the thread."""
        while self.unstarted:
            item = self.unstarted[0]
            self.start(item, again=True)
            self.unstarted.pop(0)
        while self.unloaded:
            claim = self.unloaded[0]
            try:
                item = load_item(claim, self.scale)
            except DatabaseError:
                raise  # the supervisor backs off; the claim is loaded at the next turn
            except Exception as exc:
                log.exception("cannot load claimed partition %d", claim.partition_id)
                self.unloaded.pop(0)
                self.book.fail_claim(claim, f"reading the job failed: {type(exc).__name__}: {exc}")
                continue
            self.unloaded.pop(0)
            item = self.book.add(item)
            # Claimed while its process was still busy: it waits, held and recorded reserving,
            # and starts (its reservation, then synthesizing) the moment the process is free.
            self.ready.append(item)

    def start(self, item: WorkItem, again: bool = False) -> None:
        """Start the item's life (its reservation first); ``again``: its reservation, cut short
        by the database, is made again."""
        try:
            if again:
                self.book.carry(item, [lc.Reserve()])
            else:
                self.book.run(item, lc.Start())
        except DatabaseError:
            if not again:
                self.unstarted.append(item)  # nothing held: reserved again at the next turn
            raise
