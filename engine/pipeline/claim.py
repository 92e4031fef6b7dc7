"""Claim: the dispatcher thread takes queued partitions for this host, one at a time.

It claims only while the synthesis pool has a free slot and not too much synthesized work
already waits for a proving worker (the pacer), so a host never hoards partitions another
host could be proving. Asking with room to spare marks the host free, which placement by key
reads (engine.ledger.placement): a host holding a key keeps its partitions while it is free. Each claim is loaded with its circuit's memory needs, reserved, and
handed to synthesis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, connection

from engine.ledger.writer import StatusWriter
from engine.pipeline.inflight import InFlight, Signals
from engine.pipeline.prove import ProofQueue
from engine.pipeline.synthesize import Synthesis
from engine.pipeline.work import WorkItem, load_item

log = logging.getLogger("engine.claim")


class Dispatcher:
    def __init__(self, writer: StatusWriter, book: InFlight, signals: Signals, synthesis: Synthesis,
                 proof_queue: ProofQueue, reserve: Callable[[WorkItem], bool], scale: str, pace_target: int) -> None:
        self.writer = writer
        self.book = book
        self.signals = signals
        self.synthesis = synthesis
        self.proof_queue = proof_queue
        self.reserve = reserve
        self.scale = scale
        self.pace_target = pace_target
        self.idle_poll = 0.1

    def run(self) -> None:
        signals = self.signals
        while not signals.stopping.is_set():
            if signals.draining.is_set():  # drained from the console: finish what is held, claim nothing
                signals.queue_empty.set()
                signals.stopping.wait(self.idle_poll)
                continue
            if not self.synthesis.has_room(len(self.proof_queue), self.pace_target):
                continue
            # Room for more than this claim: the host is free, and says so for placement by key.
            free = self.synthesis.spare(len(self.proof_queue), self.pace_target) > 1
            try:
                claims = self.writer.claim(1, refused=self.book.keycache.refused())
                if free or not claims:
                    self.writer.mark_free()
            except DatabaseError as exc:  # the database went away: try again shortly
                log.error("claiming failed: %s", exc)
                connection.close()
                signals.wake.wait(0.5)
                continue
            if not claims:
                signals.queue_empty.set()
                signals.wake.wait(self.idle_poll)
                signals.wake.clear()
                continue
            signals.queue_empty.clear()
            self.start(self.book.add(load_item(claims[0], self.scale)))

    def start(self, item: WorkItem) -> None:
        """Reserve what the item needs (its synthesis process's compiled matrices first), then
        synthesize it."""
        process = self.synthesis.prepare(item)
        if process is not None and self.reserve(item):
            self.synthesis.start(item, process)
