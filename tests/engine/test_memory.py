"""The memory manager: the budget is never exceeded, waiters are served in order, idle keys
are evicted when short, and a request that can never fit fails at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pipeline.memory import MemoryBudgetError, MemoryManager, Reservation, budget_bytes, total_ram
from tests.engine.conftest import wait_until


def waiting(memory: MemoryManager, n: int) -> Callable[[], bool]:
    """Whether ``n`` requests wait for memory now."""
    return lambda: memory.snapshot()["waiting"] == n

def test_auto_budget_is_total_ram_minus_the_margin() -> None:
    assert budget_bytes("auto", "1GiB") == total_ram() - 2**30
    assert budget_bytes("512MiB", "1GiB") == 512 * 2**20


def test_a_request_larger_than_the_budget_fails_at_once_with_a_clear_message() -> None:
    m = MemoryManager(1000)
    with pytest.raises(MemoryBudgetError, match="whole memory budget"):
        m.acquire("porep-c2 job-1", 1001)


def test_a_reservation_releases_on_exit_and_in_parts() -> None:
    m = MemoryManager(1000)
    with m.acquire("job-1", 600) as r:
        r.release_part(200)
        assert m.used == 400
        assert m.snapshot()["by_owner"] == {"job-1": 400}
    assert m.used == 0
    assert m.snapshot()["by_owner"] == {}


def test_waiters_of_one_priority_are_served_first_come_first_served() -> None:
    m = MemoryManager(100)
    held = m.acquire("holder", 100)
    order: list[str] = []

    def take(name: str, priority: int) -> None:
        r = m.acquire(name, 60, priority)
        order.append(name)
        r.release()

    threads = []
    for i, (name, prio) in enumerate([("n1", 2), ("n2", 2), ("c1", 0), ("n3", 2)]):
        t = threading.Thread(target=take, args=(name, prio))
        t.start()
        threads.append(t)
        wait_until(waiting(m, i + 1), timeout=5, poll=0.005)
    held.release()
    for t in threads:
        t.join(5)
    assert order == ["c1", "n1", "n2", "n3"]


def test_idle_keys_are_evicted_when_a_request_is_short() -> None:
    m = MemoryManager(100)
    key = m.acquire("key:porep-c2/tiny", 70)
    freed: list[int] = []

    def evictor(needed: int) -> int:
        freed.append(needed)
        key.release()
        return 70

    m.add_evictor(evictor)
    with m.acquire("job-1", 50):
        assert freed == [20]
        assert m.used == 50


def test_a_cancelled_waiter_gives_up_its_place() -> None:
    m = MemoryManager(10)
    m.acquire("holder", 10)
    cancelled = threading.Event()
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            m.acquire("job-x", 5, cancelled=cancelled.is_set)
        except InterruptedError as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    wait_until(waiting(m, 1), timeout=5, poll=0.005)
    cancelled.set()
    t.join(2)
    assert errors and m.snapshot()["waiting"] == 0


# ---- properties ---------------------------------------------------------------------

op = st.one_of(
    st.tuples(st.just("acquire"), st.integers(0, 3), st.integers(1, 60)),  # priority, bytes
    st.tuples(st.just("part"), st.integers(0, 7), st.integers(0, 40)),  # which, bytes
    st.tuples(st.just("release"), st.integers(0, 7), st.just(0)),
    st.tuples(st.just("key"), st.just(0), st.integers(1, 40)),  # an evictable key
)


class CheckedMemory(MemoryManager):
    """Checks its books after every take: what is used never exceeds the budget, and the owners' sum is it."""

    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.over: list[int] = []

    def _take(self, owner: str, nbytes: int) -> Reservation:
        r = super()._take(owner, nbytes)
        if self.used > self.budget or sum(self.by_owner.values()) != self.used:
            self.over.append(self.used)
        return r


@settings(max_examples=40, deadline=None)
@given(scripts=st.lists(st.lists(op, min_size=1, max_size=12), min_size=2, max_size=4))
def test_random_concurrent_sequences_never_exceed_the_budget(scripts: list[list[tuple[str, int, int]]]) -> None:
    budget = 100
    m = CheckedMemory(budget)
    keys: list = []
    keys_lock = threading.Lock()

    def evictor(needed: int) -> int:
        freed = 0
        with keys_lock:
            while keys and freed < needed:
                r = keys.pop(0)
                freed += r.nbytes
                r.release()
        return freed

    m.add_evictor(evictor)

    def run(script: list[tuple[str, int, int]], me: int) -> None:
        mine: list = []
        try:
            play(script, me, mine)
        except TimeoutError:
            pass  # this thread holds what it waits for; it gives up, as a caller would
        finally:
            for r in mine:
                r.release()

    def play(script: list[tuple[str, int, int]], me: int, mine: list) -> None:
        for kind, a, b in script:
            if kind == "acquire":
                mine.append(m.acquire(f"t{me}", b, a, timeout=0.3))
            elif kind == "key":
                try:  # a key loaded only if its bytes are free now, as the key cache would
                    r = m.acquire(f"key{me}", b, 3, timeout=0)
                except TimeoutError:
                    continue
                with keys_lock:
                    keys.append(r)
            elif mine:
                r = mine[a % len(mine)]
                r.release_part(b) if kind == "part" else r.release()

    threads = [threading.Thread(target=run, args=(s, i)) for i, s in enumerate(scripts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not m.over
    evictor(budget)
    # Timeouts are allowed (a thread may hold what another waits for); leaks are not.
    assert m.used == 0 and m.by_owner == {}


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 100)), min_size=2, max_size=8))
def test_waiters_are_served_in_priority_then_arrival_order(sizes: list[tuple[int, int]]) -> None:
    m = MemoryManager(100)
    held = m.acquire("holder", 100)
    order: list[int] = []
    threads = []
    for i, (prio, nbytes) in enumerate(sizes):
        def take(i: int = i, prio: int = prio, nbytes: int = nbytes) -> None:
            r = m.acquire(f"w{i}", nbytes, prio)
            order.append(i)
            r.release()

        t = threading.Thread(target=take)
        t.start()
        threads.append(t)
        wait_until(waiting(m, i + 1), timeout=5, poll=0.005)
    held.release()
    for t in threads:
        t.join(5)
    expected = [i for i, _ in sorted(enumerate(sizes), key=lambda e: (e[1][0], e[0]))]
    assert order == expected
