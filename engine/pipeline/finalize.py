"""Finalize: the CPU-side end of a proof, off the proving worker's path.

``gpu_prove_finish`` (wait for the kernels, finish on the CPU, assemble) → verify the
partition proof against the circuit's verifying key → record ``done`` with the proof and
its public inputs → release the rest of the partition's memory and the proving key.
A proof that does not verify fails the partition with that reason (another attempt, with
fresh randomness, may succeed — so the failure counts towards MAX_ATTEMPTS).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone

from engine import prover
from engine.format import fmt_ms
from engine.pipeline.device_memory import DeviceMemory
from engine.pipeline.inflight import InFlight
from engine.pipeline.memory import release_freed_memory
from engine.pipeline.supervise import Health
from engine.pipeline.work import WorkItem
from engine.prover import ProofAborted
from engine.prover.formats.snarkjs_json import vk_digest
from engine.prover.verify import verify
from engine.states import PartitionState

log = logging.getLogger("engine.finalize")


def _ms(seconds: float | None) -> str:
    return fmt_ms(1000 * seconds if seconds is not None else None)
P = PartitionState


def proof_json(proof: Any) -> Any:
    """The proof in snarkjs proof.json form (what the records and the API keep)."""
    from engine.prover.snarkjs import proof_to_json

    return proof_to_json(proof)


class Finalizers:
    def __init__(self, book: InFlight, params_dir: Path, threads: int, device_memory: DeviceMemory | None = None,
                 health: Health | None = None) -> None:
        self.book = book
        self.health = health  # a finalizer's bug ends the process, as any engine thread's does
        self.device_memory = device_memory  # a launch's device memory is given back once finished
        self.params_dir = params_dir
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="finalize")
        self._vks: dict[str, Any] = {}
        self._vk_lock = threading.Lock()
        self.active = 0
        self._count = threading.Lock()

    def submit(self, item: WorkItem) -> None:
        with self._count:
            self.active += 1
        self.pool.submit(self._run, item)

    def _run(self, item: WorkItem) -> None:
        try:
            self.finish(item)
        except Exception as exc:  # a pool's task would keep it in a future no one reads
            log.exception("engine thread finalize died finishing %s", item.label, extra=self.book.about(item))
            if self.health is not None:
                self.health.died("finalize", exc)
        finally:
            with self._count:
                self.active -= 1
            close_old_connections()
            release_freed_memory()  # a finished partition's arrays, not kept by the heap for the next

    def finish(self, item: WorkItem) -> None:
        try:
            self._finish(item)
        finally:  # proved, failed or dropped: its kernels are done with the device's buffers
            if self.device_memory is not None:
                self.device_memory.finished(item.claim.partition_id)

    def _finish(self, item: WorkItem) -> None:
        book = self.book
        try:
            t0 = time.perf_counter()
            proof = item.proof if item.proof is not None else prover.gpu_prove_finish(item.pending, abort=item.abandoned)
            item.timings["finish_s"] = time.perf_counter() - t0
            if item.dropped:
                raise ProofAborted("proof abandoned before verification")
            publics = item.publics
            vk = self.verifying_key(item)
            ok = verify(vk, proof, [int(x) for x in publics])
        except ProofAborted:  # cancelled or fenced meanwhile: nothing to record
            book.drop(item)
            return
        except Exception as exc:  # finishing on the CPU failed; a new attempt starts over
            log.exception("finishing %s failed", item.label, extra=book.about(item))
            book.fail(item, item.public_reason(f"finishing the proof failed: {type(exc).__name__}: {exc}"),
                        retryable=True)
            return
        if not ok:
            book.fail(item, *_unverified(item))
            return
        # Said before it is recorded, so it comes before the "job done" its record may bring; it
        # is true either way (a refused record says so in a line of its own).
        t = item.timings
        log.info("proved %s: synthesis %s, gpu %s, finishing %s; verified", item.label, _ms(t.get("synth_s")),
                 _ms(t.get("gpu_s")), _ms(t.get("finish_s")), extra=book.about(item))
        if book.record(item, P.DONE, proof=proof_json(proof), public_inputs=list(publics),
                         vk_digest=vk_digest(vk), finished_at=timezone.now()):
            book.completed(item)

    def verifying_key(self, item: WorkItem) -> Any:
        if item.vk is not None:
            return item.vk
        with self._vk_lock:
            if item.circuit_id not in self._vks:
                from engine.circuits.keystore import KeyStore

                keys = KeyStore(self.params_dir)
                self._vks[item.circuit_id] = keys.load_verifying_key(item.circuit_id)
            return self._vks[item.circuit_id]

    def stop(self) -> None:
        self.pool.shutdown(wait=True)
        connection.close()


def _unverified(item: WorkItem) -> tuple[str, bool]:
    """A proof that fails verification: the reason, and whether another attempt may fix it.

    A circom circuit's witness is the client's: every attempt would prove the same unsatisfied
    witness. Our own circuits synthesize their witness, so there a bad proof is a fault worth
    a retry."""
    if item.source.client_witness:
        return ("the proof does not verify: the witness does not satisfy the circuit of the zkey", False)
    return ("partition proof did not verify against the circuit's verifying key", True)
