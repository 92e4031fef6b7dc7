"""Reserve: before a partition is synthesized, everything it will hold is held for it.

Its proving key is checked out of the host's key cache (a built-in kind's or a registered
circuit's) and its memory reserved from the circuit's real needs, blocking until the bytes
fit: memory is the back-pressure that keeps a host from taking more than it can prove. A
client's uploaded zkey is read only inside the job's reservation, so its bytes are counted.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError

from engine.format import fmt_bytes
from engine.pipeline.inflight import InFlight
from engine.pipeline.keycache import KeyCache
from engine.pipeline.keys import KeyRefused
from engine.pipeline.memory import MemoryBudgetError, MemoryManager
from engine.pipeline.work import CircuitSource, WorkItem
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


def _give_back(item: WorkItem, keycache: KeyCache) -> None:
    if item.reservation is not None:
        item.reservation.release()
    if item.key is not None and item.source.shares_key:
        keycache.check_in(item.circuit_id)
    item.key = item.vk = item.reservation = None


def reserve(item: WorkItem, book: InFlight, keycache: KeyCache, memory: MemoryManager,
            stopping: threading.Event) -> bool:
    """Hold the item's key and memory; False (the item failed or dropped, freed) if not."""
    started = time.monotonic()
    try:
        if item.source.shares_key:
            item.key = keycache.checkout(item.circuit_id, item.key_bytes, item.priority)
            if item.source is CircuitSource.REGISTERED:  # its vk is the cached key's
                item.vk = item.key.vk
            _check_fits_with_key(item, keycache.reserved_bytes(item.circuit_id), memory)
        item.reservation = memory.acquire(partition_owner(item.kind, item.job_id), item.partition_bytes, item.priority,
                                          cancelled=lambda: item.dropped or stopping.is_set())
        if not item.source.shares_key:  # the client's own key, read once per job, inside its reservation
            from engine.prover import read_zkey

            item.key = read_zkey(item.zkey_path)
            item.vk = item.key.vk
    except DatabaseError:
        # The database went away (the key's farm check reads it): nothing is the partition's
        # fault. What was held is given back, and the dispatcher reserves it again once back.
        _give_back(item, keycache)
        raise
    except MemoryBudgetError as exc:
        book.fail(item, str(exc), retryable=False)
        return False
    except InterruptedError:
        book.drop(item, hand_back=stopping.is_set())
        return False
    except KeyRefused as exc:  # another host with the farm's key proves it: hand it back
        log.error("refusing to prove %s on this host: %s", item.circuit_id, exc, extra=book.about(item))
        keycache.refuse(item.circuit_id, str(exc))
        book.drop(item, hand_back=True, reason=f"handed back: this host refuses {item.circuit_id} ({exc})")
        return False
    except Exception as exc:  # a missing or corrupt key, a failed setup: say which and why
        log.exception("cannot prepare %s", item.label, extra=book.about(item))
        book.fail(item, item.public_reason(f"preparing {item.circuit_id}: {exc}"), retryable=False)
        return False
    log.debug("reserved %s: %s of memory and its key %s, after %.3fs", item.label, fmt_bytes(item.partition_bytes),
              item.circuit_id, time.monotonic() - started, extra=book.about(item))
    return True
