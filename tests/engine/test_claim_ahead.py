"""A host claims one partition ahead per synthesis process, and no more: the claim's and the
load's transactions happen while the process works on the partition before, so none of them
stands between one synthesis and the next (issue 46), and a host still never hoards work."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.engine.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
P = PartitionState


def states(job: ProofJob) -> Counter[str]:
    return Counter(Partition.objects.filter(job=job).values_list("state", flat=True))


def warm(engine: Any) -> tuple[dict[str, Any], int, int]:
    """The engine proved a job of the circuit (its key loaded, its process holding the compiled
    circuit: nothing more asks the process before a synthesis); the inputs, partitions and the
    one synthesis process."""
    inputs, n = validate_inputs("porep-c2", demo_inputs("porep-c2"))
    job, _ = submit_job(kind="porep-c2", job_id="warm", inputs=inputs, num_partitions=n, circuit_id="porep-c2/tiny",
                        scale="tiny")
    wait_until(lambda: ProofJob.objects.get(pk=job.pk).state == JobState.DONE, timeout=60)
    (process,) = engine.synthesis.pids()
    return inputs, n, process


def test_while_its_only_synthesis_process_is_busy_a_host_holds_one_partition_ahead_and_no_more(
        start_engine: Callable[..., Any]) -> None:
    inputs, n, process = warm(start_engine(synthesis=1, workers_per_device=1))
    os.kill(process, signal.SIGSTOP)  # the first partition's synthesis cannot end
    try:
        job, _ = submit_job(kind="porep-c2", job_id="ahead", inputs=inputs, num_partitions=n,
                            circuit_id="porep-c2/tiny", scale="tiny")
        wait_until(lambda: states(job)[P.SYNTHESIZING] == 1 and states(job)[P.RESERVING] == 1)
        time.sleep(1.0)  # five turns of the dispatcher's wait: it claims nothing more
        assert states(job) == Counter({P.SYNTHESIZING: 1, P.RESERVING: 1, P.PENDING: n - 2})
    finally:
        os.kill(process, signal.SIGCONT)
    wait_until(lambda: ProofJob.objects.get(pk=job.pk).state == JobState.DONE, timeout=60)
    assert states(job) == Counter({P.DONE: n})


def test_a_stop_hands_back_at_once_the_partition_claimed_ahead(start_engine: Callable[..., Any]) -> None:
    engine = start_engine(synthesis=1, workers_per_device=1)
    inputs, n, process = warm(engine)
    os.kill(process, signal.SIGSTOP)
    job, _ = submit_job(kind="porep-c2", job_id="ahead-stop", inputs=inputs, num_partitions=n,
                        circuit_id="porep-c2/tiny", scale="tiny")
    wait_until(lambda: states(job)[P.RESERVING] == 1 and states(job)[P.SYNTHESIZING] == 1)
    ahead = Partition.objects.get(job=job, state=P.RESERVING)
    # The frozen synthesis holds the drain to its end (3 s); it goes on after that, so the stop
    # can end its processes.
    thawed = threading.Timer(4.0, os.kill, (process, signal.SIGCONT))
    thawed.start()
    asked = timezone.now()
    try:
        engine.stop(drain_seconds=3)
    finally:
        thawed.join()
    ahead.refresh_from_db()
    assert ahead.state == P.PENDING and ahead.host is None and ahead.requeued_at is not None
    assert (ahead.requeued_at - asked).total_seconds() < 1.5, "handed back only at the drain's end"
    assert not Partition.objects.filter(job=job, state__in=(P.RESERVING, P.SYNTHESIZING)).exists()
