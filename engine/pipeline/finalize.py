"""Finalize: the CPU-side end of a proof, off the proving worker's path.

The lifecycle's ``Finish`` and ``Record done`` are carried out here: ``gpu_prove_finish``
(wait for the kernels, finish on the CPU, assemble), the launch's device memory given back,
the partition proof verified against the circuit's verifying key, then ``done`` recorded with
the proof and its public inputs. A proof that does not verify fails the partition with that
reason (another attempt, with fresh randomness, may succeed — so the failure counts towards
MAX_ATTEMPTS).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from engine import prover
from engine.format import fmt_ms
from engine.pipeline import lifecycle as lc
from engine.pipeline.device_memory import DeviceMemory
from engine.pipeline.inflight import InFlight, timings
from engine.pipeline.memory import release_freed_memory
from engine.pipeline.supervise import Health
from engine.pipeline.work import Finished, WorkItem
from engine.prover import ProofAborted
from engine.prover.formats.snarkjs_json import vk_digest
from engine.prover.verify import verify
from engine.states import PartitionState

log = logging.getLogger("engine.finalize")
# A line per claim and per proof: on the job's page always, in the engine's own log at debug.
progress = logging.getLogger("engine.progress")
P = PartitionState


def _ms(seconds: float | None) -> str:
    return fmt_ms(1000 * seconds if seconds is not None else None)


def proof_json(proof: Any) -> Any:
    """The proof in snarkjs proof.json form (what the records and the API keep)."""
    from engine.prover.snarkjs import proof_to_json

    return proof_to_json(proof)


class Finalizers:
    def __init__(self, book: InFlight, params_dir: Path, threads: int, device_memory: DeviceMemory | None = None,
                 health: Health | None = None, inline: bool = False) -> None:
        self.book = book
        self.device_memory = device_memory  # a launch's device memory is given back once finished
        self.health = health  # a finalizer's bug ends the process, as any engine thread's does
        self.params_dir = params_dir
        # Split proving off (a benchmark's reference): the worker that launched finishes too.
        self.inline = inline
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="finalize")
        self._vks: dict[str, Any] = {}
        self._vk_lock = threading.Lock()
        self.active = 0
        self._count = threading.Lock()

    def take(self, item: WorkItem, instruction: lc.Finish) -> None:
        """The Finish instruction: a finalizer's (or, without split, this thread's)."""
        if self.inline:
            self.finish(item)
        else:
            self.submit(item)

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
            # The thread keeps its connection for the next partition (closed after each one, a
            # connection was opened per partition: with CONN_MAX_AGE 0 every close is final); a
            # database error closes it where it is met (engine.pipeline.supervise).
            release_freed_memory()  # a finished partition's arrays, not kept by the heap for the next

    def finish(self, item: WorkItem) -> None:
        """Wait for the device, finish, verify; post what became of it."""
        try:
            event = self._finish(item)
        finally:  # proved, failed or dropped: its kernels are done with the device's buffers
            if self.device_memory is not None:
                self.device_memory.finished(item.claim.partition_id)
        self.book.run(item, event)

    def _finish(self, item: WorkItem) -> lc.Event:
        launch, synthesized = item.launch, item.synthesized
        assert launch is not None and synthesized is not None
        try:
            t0 = time.perf_counter()
            proof = launch.proof if launch.proof is not None else prover.gpu_prove_finish(launch.pending,
                                                                                       abort=item.abandoned)
            seconds = time.perf_counter() - t0
            if item.abandoned():
                raise ProofAborted("proof abandoned before verification")
            vk = self.verifying_key(item)
            ok = verify(vk, proof, [int(x) for x in synthesized.publics])
        except ProofAborted:  # cancelled or fenced meanwhile: nothing to record
            return lc.Abandoned()
        except Exception as exc:  # finishing on the CPU failed; a new attempt starts over
            log.exception("finishing %s failed", item.label, extra=self.book.about(item))
            return lc.Failed(item.public_reason(f"finishing the proof failed: {type(exc).__name__}: {exc}"),
                             retryable=True)
        if not ok:
            return lc.Failed(*_unverified(item))
        item.proof = Finished(proof_json(proof), list(synthesized.publics), vk_digest(vk), seconds)
        # Said before it is recorded, so it comes before the "job done" its record may bring; it
        # is true either way (a refused record says so in a line of its own).
        t = timings(item)
        progress.info("proved %s: synthesis run %s, launch %s, finish %s; verified", item.label, _ms(t.get("synth_s")),
                 _ms(t.get("gpu_s")), _ms(t.get("finish_s")), extra=self.book.about(item))
        return lc.Proved()

    def record_done(self, item: WorkItem, instruction: lc.Record) -> lc.Event:
        proof = item.proof
        assert proof is not None
        return self.book.record(item, P.DONE, proof=proof.proof_json, public_inputs=proof.publics,
                                vk_digest=proof.vk_digest, finished_at=timezone.now())

    def verifying_key(self, item: WorkItem) -> Any:
        if item.held is not None and item.held.vk is not None:
            return item.held.vk
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
