"""The engine's handover blocks, kept between partitions with their pages allocated.

A block made for one partition and freed with it cost its pages three times over: allocated
and zeroed by the engine, faulted into the synthesis process's mapping, punched out again at
the end. On this kind of VM that was about 3 ms of a medium partition's 9 ms in its synthesis
process, and 2.6 ms more of the engine's own. The pool lends a partition the blocks an earlier
partition let go, pages and all, so the synthesis writes into memory that is already there.

A kept block's bytes are the engine's own, reserved under ``handover blocks``
(engine.status.holdings.HANDOVER_OWNER) for as long as the pool has the block, lent or at rest;
a partition that borrows reserves only the rest of what it needs. So the reservation moves only
when the pool grows (no block of the size at rest), when blocks have rested long, and when
memory runs short (the pool is asked first, before idle keys): the host's row is written a few
times, not at every partition.

The pool sizes itself: it makes a block only when none of the size rests, so it never has more
blocks of a size than partitions once held at the same time, and it lends the block let go last,
so blocks beyond what the work needs now rest untouched until they expire. A fixed count kept
at rest (the witness and a/b/c blocks counted together) freed a witness block every job, as
witness blocks live longer (until the proof is finished) than a/b/c ones, and the next
partition had a new block made and mapped anew in its synthesis process: about 1 ms of a
medium partition's synthesis, once a job. A block that comes back while a view of it
is still alive has that view's pages swapped for zeros first (freed instead where that cannot
be done), so nothing can read another partition's assignment through it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from engine.pipeline.handover import PREFIX, Block, Blocks, block_bytes, root
from engine.pipeline.memory import MemoryManager, Reservation
from engine.status.holdings import HANDOVER_OWNER

# Kept blocks' names, unique in the process (tests run several engines in one).
_NAMES = itertools.count(1)


class BlockPool:
    """Lends blocks (``lend``), takes them back (``keep``, a block's keeper), frees the oldest at
    rest when memory runs short (``evict``) or when they have rested long (``expire``)."""

    def __init__(self, memory: MemoryManager) -> None:
        self.memory = memory
        self._lock = threading.Lock()
        self._held: dict[Path, Reservation] = {}  # every block the pool has, lent or at rest
        self._rest: OrderedDict[Path, tuple[int, float]] = OrderedDict()  # at rest, in the order let go: bytes, since
        self._closed = False
        memory.add_evictor(self.evict)

    def lend(self, witness_rows: int, domain_rows: int, priority: int = 2,
             cancelled: Callable[[], bool] | None = None) -> Blocks:
        """A partition's two blocks: at rest ones of their sizes, or new ones reserved for the pool
        (waiting for the bytes as a reservation does; InterruptedError once ``cancelled``)."""
        witness = self._lend(block_bytes(witness_rows), priority, cancelled)
        try:
            abc = self._lend(block_bytes(3 * domain_rows), priority, cancelled)
        except BaseException:
            witness.let_go()
            raise
        return Blocks(witness, abc, witness_rows, domain_rows)

    def _lend(self, nbytes: int, priority: int, cancelled: Callable[[], bool] | None) -> Block:
        with self._lock:  # the block let go last: its pages are the warmest, and the others age
            path = next((p for p, (n, _) in reversed(self._rest.items()) if n == nbytes), None)
            if path is not None:
                del self._rest[path]
        if path is not None:
            try:
                return Block(path, nbytes, keeper=self, made=True)
            except OSError:  # removed from /dev/shm by hand meanwhile: a new one instead
                self._drop(path)
        reservation = self.memory.acquire(HANDOVER_OWNER, nbytes, priority, cancelled=cancelled)
        path = root() / f"{PREFIX}{os.getpid()}-kept-{next(_NAMES)}"
        try:
            block = Block(path, nbytes, keeper=self)
        except BaseException:
            reservation.release()
            raise
        with self._lock:
            self._held[path] = reservation
        return block

    def keep(self, block: Block) -> None:
        """``block`` let go by its partition: at rest for the next one, its engine mapping gone
        (engine.pipeline.handover.Block.unmap); freed instead, its bytes given back, where that
        mapping could not be taken from a view still alive, or the pool has closed."""
        if not block.unmap():
            block.free()
            self._drop(block.path)
            return
        with self._lock:
            closed = self._closed
            if not closed:
                self._rest[block.path] = (block.nbytes, time.monotonic())
        if closed:
            self._discard(block.path)

    def evict(self, short: int) -> int:
        """The memory manager is ``short`` bytes: free blocks at rest, oldest first, until that is
        found or none rest; the bytes freed."""
        with self._lock:
            chosen: list[Path] = []
            found = 0
            while self._rest and found < short:
                path, (nbytes, _) = self._rest.popitem(last=False)
                chosen.append(path)
                found += nbytes
        return sum(self._discard(path) for path in chosen)

    def expire(self, rested_seconds: float) -> int:
        """Free the blocks that have rested longer than ``rested_seconds`` (an idle engine holds
        none for long); how many."""
        now = time.monotonic()
        with self._lock:
            old = [path for path, (_, since) in self._rest.items() if now - since > rested_seconds]
            for path in old:
                del self._rest[path]
        for path in old:
            self._discard(path)
        return len(old)

    def close(self) -> None:
        """Free every block at rest; blocks still lent are freed when they come back."""
        with self._lock:
            self._closed = True
            rest = list(self._rest)
            self._rest.clear()
        for path in rest:
            self._discard(path)

    def at_rest(self) -> int:
        with self._lock:
            return len(self._rest)

    def held_bytes(self) -> int:
        """What the pool has reserved: its blocks, lent and at rest."""
        with self._lock:
            return sum(r.nbytes for r in self._held.values())

    def _discard(self, path: Path) -> int:
        """A block at rest freed, its length first (a synthesis process may still map it: the
        truncation takes the pages all the same), then its name; its bytes."""
        with contextlib.suppress(OSError):
            os.truncate(path, 0)
        path.unlink(missing_ok=True)
        return self._drop(path)

    def _drop(self, path: Path) -> int:
        with self._lock:
            reservation = self._held.pop(path, None)
        if reservation is None:
            return 0
        nbytes = reservation.nbytes
        reservation.release()
        return nbytes
