"""A synthesis process's slot runs the engine's calls in order in a real spawned process, gives
back what each returned or raised, and on the process's death or a shutdown fails or cancels
exactly the calls it did not run."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool

import pytest

from engine.pipeline.process_slot import ProcessSlot


@pytest.fixture
def slot() -> Iterator[ProcessSlot]:
    made = ProcessSlot((os.getpid(), False, 0))
    yield made
    made.shutdown(wait=True, cancel=True)


def test_calls_run_in_the_process_in_the_order_sent(slot: ProcessSlot) -> None:
    futures = [slot.submit(math.factorial, n) for n in range(12)]
    assert [f.result(timeout=60) for f in futures] == [math.factorial(n) for n in range(12)]
    assert slot.submit(os.getpid).result(timeout=10) == slot.pid != os.getpid()


def test_what_a_call_raises_comes_back_and_the_process_goes_on(slot: ProcessSlot) -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        slot.submit(int, "not a number").result(timeout=60)
    assert slot.submit(math.factorial, 5).result(timeout=10) == 120
    assert not slot.broken


def test_a_killed_process_fails_its_running_and_waiting_calls_and_its_slot_is_broken(slot: ProcessSlot) -> None:
    assert slot.pid is not None and slot.submit(os.getpid).result(timeout=60) == slot.pid
    running, waiting = slot.submit(time.sleep, 30), slot.submit(os.getpid)
    os.kill(slot.pid, signal.SIGKILL)  # as the kernel's OOM killer would
    for future in (running, waiting):
        with pytest.raises(BrokenProcessPool):
            future.result(timeout=10)
    assert slot.broken
    with pytest.raises(BrokenProcessPool):
        slot.submit(os.getpid)


def test_a_shutdown_that_cancels_lets_the_running_call_finish_and_cancels_the_waiting(slot: ProcessSlot) -> None:
    slot.submit(os.getpid).result(timeout=60)  # the process is up
    running, waiting = slot.submit(time.sleep, 0.3), slot.submit(os.getpid)
    slot.shutdown(wait=True, cancel=True)
    assert running.result(timeout=0) is None
    with pytest.raises(CancelledError):
        waiting.result(timeout=0)
    assert slot.process.exitcode == 0 and not slot.broken


def test_a_shutdown_without_cancel_runs_every_call_sent_before_it(slot: ProcessSlot) -> None:
    futures = [slot.submit(math.factorial, n) for n in (3, 4, 5)]
    slot.shutdown(wait=True)
    assert [f.result(timeout=0) for f in futures] == [6, 24, 120]
    assert slot.process.exitcode == 0


class Awkward(Exception):
    """An error that pickles but does not unpickle (its arguments are not its constructor's)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text}")


def raise_awkward() -> None:
    raise Awkward(7, "refused")


def test_an_answer_that_cannot_be_read_fails_its_call_and_not_the_slot(slot: ProcessSlot) -> None:
    with pytest.raises(RuntimeError, match="could not be read"):
        slot.submit(raise_awkward).result(timeout=60)
    assert slot.submit(math.factorial, 4).result(timeout=10) == 24
    assert not slot.broken
