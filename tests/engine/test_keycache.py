"""The key cache tells the engine when its list of keys changes, so the host row lists a key
before any partition proves with it, not a heartbeat later."""

from __future__ import annotations

import pytest

from engine.pipeline.keycache import KeyCache
from engine.pipeline.memory import MemoryBudgetError, MemoryManager


def test_loading_and_evicting_a_key_report_the_change_and_a_cache_hit_does_not() -> None:
    reports: list[list[str]] = []
    keys = KeyCache(MemoryManager(1000), loader=lambda circuit_id: object(),
                    on_change=lambda: reports.append([k["circuit_id"] for k in keys.snapshot()]))
    keys.checkout("porep-c2/tiny", 100)
    keys.checkout("porep-c2/tiny", 100)
    assert reports == [["porep-c2/tiny"]]
    keys.check_in("porep-c2/tiny")
    keys.check_in("porep-c2/tiny")
    assert keys.evict(1) == 100
    assert reports == [["porep-c2/tiny"], []]


def test_a_failing_report_does_not_fail_the_checkout() -> None:
    def broken() -> None:
        raise RuntimeError("database is away")

    keys = KeyCache(MemoryManager(1000), loader=lambda circuit_id: "key", on_change=broken)
    assert keys.checkout("winning-post/tiny", 10) == "key"


def test_a_loaded_keys_reservation_becomes_what_the_key_really_holds() -> None:
    memory = MemoryManager(1000)
    keys = KeyCache(memory, loader=lambda circuit_id: {"tiny": 40, "big": 300}[circuit_id.split("/")[1]],
                    sizer=lambda key: key)
    keys.checkout("winning-post/tiny", 100)  # estimated high: the rest goes back
    keys.checkout("winning-post/big", 100)  # estimated low: the rest is reserved too
    assert memory.snapshot()["by_owner"] == {"key:winning-post/tiny": 40, "key:winning-post/big": 300}
    assert memory.used == 340


def test_a_key_that_outgrows_the_whole_budget_fails_its_checkout_and_holds_nothing() -> None:
    memory = MemoryManager(1000)
    keys = KeyCache(memory, loader=lambda circuit_id: 5000, sizer=lambda key: key)
    with pytest.raises(MemoryBudgetError, match="whole memory budget"):
        keys.checkout("porep-c2/tiny", 100)
    assert memory.used == 0 and keys.snapshot() == []


def test_a_key_whose_image_cannot_be_mapped_goes_cold_under_pressure_instead_of_failing_the_request() -> None:
    def full_disk(key: object, circuit_id: str):
        raise OSError(28, "No space left on device")

    memory = MemoryManager(1000)
    keys = KeyCache(memory, loader=lambda circuit_id: "key", mapper=full_disk)
    keys.checkout("porep-c2/tiny", 600)
    keys.check_in("porep-c2/tiny")
    with memory.acquire("partition", 700):  # room made by dropping the key, not an exception
        assert keys.snapshot() == [] and keys.demotions[-1][2] == "cold"
