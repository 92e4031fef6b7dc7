"""GPU workers: N per device, one lock per device around kernel submission.

The split that makes the GPU never wait for CPU-side finishing work:

    take the next synthesized partition (oldest job's lowest partition first)
    record gpu (with this worker) → gpu_prove_start → record finalizing
    release the a/b/c share of the partition's memory
    hand the pending proof to a finalizer → take the next one

A worker's card is derived from the records ("proving" iff some partition is in ``gpu``
with that worker), and a worker moves its partition out of ``gpu`` itself before taking
the next, so the seed system's stale "idle" card cannot happen: no finalizer ever writes
a worker's state.

CPU backend: the "device" is a CPU slot named ``cpu``; ``gpu_prove_start`` then runs the
whole proof synchronously, so the same loop and the same records serve both backends.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from engine.models import Worker
from engine.prover.datatypes import ProofAborted
from engine.states import PartitionState

if TYPE_CHECKING:
    from engine.runtime import Engine
    from engine.synthesize import WorkItem

log = logging.getLogger("engine.prove")
P = PartitionState


@functools.cache
def prover_api() -> SimpleNamespace:
    """The prover's engine-facing functions: gpu_prove_start, gpu_prove_finish, verify."""
    from engine import prover

    return SimpleNamespace(gpu_prove_start=prover.gpu_prove_start, gpu_prove_finish=prover.gpu_prove_finish,
                           verify=prover.verify)


class GpuQueue:
    """Synthesized partitions waiting for a worker, served in claim order."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, WorkItem]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.closed = False

    def put(self, item: WorkItem) -> None:
        with self._cond:
            heapq.heappush(self._heap, (item.order, next(self._seq), item))
            self._cond.notify()

    def take(self, timeout: float = 0.5) -> WorkItem | None:
        with self._cond:
            if not self._heap and not self.closed:
                self._cond.wait(timeout)
            if not self._heap:
                return None
            return heapq.heappop(self._heap)[2]

    def remove(self, partition_id: int) -> WorkItem | None:
        with self._cond:
            for i, (_, _, item) in enumerate(self._heap):
                if item.claim.partition_id == partition_id:
                    self._heap.pop(i)
                    heapq.heapify(self._heap)
                    return item
        return None

    def drain(self) -> list[WorkItem]:
        with self._cond:
            items = [entry[2] for entry in self._heap]
            self._heap.clear()
            return items

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)


class GpuWorker:
    """One worker slot (W0, W1 … on a device); ``run`` is its thread's loop."""

    def __init__(self, engine: Engine, row: Worker, device_lock: threading.Lock, split: bool) -> None:
        self.engine = engine
        self.row = row
        self.device = row.device
        self.lock = device_lock
        self.split = split
        self.busy_s = 0.0  # seconds spent inside the prover (kernel submission, or the whole proof)
        self.started = time.perf_counter()
        self.current: WorkItem | None = None

    @property
    def name(self) -> str:
        return f"{self.device} W{self.row.ordinal}"

    def run(self) -> None:
        engine = self.engine
        while True:
            item = engine.gpu_queue.take()
            if item is None:
                if engine.gpu_queue.closed:
                    return
                continue
            self.step(item)

    def step(self, item: WorkItem) -> None:
        """Prove one partition; in split mode returns as soon as the kernels are launched."""
        self.current = item
        try:
            if not self.start(item):
                return
            if self.split:
                self.engine.finalizers.submit(item)
        finally:
            self.current = None

    def start(self, item: WorkItem) -> bool:
        """Record gpu, launch the proof, record finalizing; False if the work was dropped."""
        return self.begin(item) and self.launch(item)

    def begin(self, item: WorkItem) -> bool:
        """Take the partition onto this worker: from now on the records say it proves it."""
        if item.dropped:
            self.engine.drop(item)
            return False
        return self.engine.record(item, P.GPU, worker=self.row, gpu_started_at=timezone.now())

    def launch(self, item: WorkItem) -> bool:
        """Launch the kernels; leave ``gpu`` (split) or finish first (no split)."""
        engine = self.engine
        api = prover_api()
        abandoned = item.abandoned
        try:
            with self.lock:
                t0 = time.perf_counter()
                try:
                    item.pending = api.gpu_prove_start(item.key, item.assignment, self.device, abort=abandoned)
                    if not self.split:  # benchmark mode: hold the device until the proof is whole
                        item.proof = api.gpu_prove_finish(item.pending, abort=abandoned)
                finally:
                    elapsed = time.perf_counter() - t0
                    self.busy_s += elapsed
                    item.timings["gpu_s"] = elapsed
        except ProofAborted:  # cancelled or fenced while proving: free its memory now
            engine.drop(item)
            return False
        except Exception as exc:  # a kernel or prover error: another attempt may succeed
            log.exception("%s: proving %s failed", self.name, item.label)
            engine.fail(item, item.public_reason(f"proving on {self.device} failed: {type(exc).__name__}: {exc}"),
                        retryable=True)
            return False
        # Leave gpu before taking the next partition: the records never show a worker twice.
        if not engine.record(item, P.FINALIZING, gpu_finished_at=timezone.now()):
            return False
        if item.reservation is not None:
            item.reservation.release_part(item.abc_bytes)  # A·w, B·w, C·w are on the device now
        item.assignment = None
        if not self.split:
            self.engine.finalizers.finish(item)
        return True

    def utilisation(self) -> float:
        wall = time.perf_counter() - self.started
        return self.busy_s / wall if wall > 0 else 0.0


def worker_rows(host: Any, devices: list[str], per_device: int) -> list[Worker]:
    rows = []
    for device in devices:
        for ordinal in range(per_device):
            row, _ = Worker.objects.get_or_create(host=host, device=device, ordinal=ordinal)
            rows.append(row)
    # Slots from an earlier run with more workers are removed, so the console shows what runs.
    # One still named by a partition in gpu stays until the rescue requeues that partition:
    # the database refuses a gpu partition without a worker.
    (Worker.objects.filter(host=host).exclude(pk__in=[r.pk for r in rows])
     .exclude(partitions__state=PartitionState.GPU).delete())
    return rows
