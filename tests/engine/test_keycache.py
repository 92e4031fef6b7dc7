"""The key cache tells the engine when its list of keys changes, so the host row lists a key
before any partition proves with it, not a heartbeat later."""

from __future__ import annotations

from engine.pipeline.keycache import KeyCache
from engine.pipeline.memory import MemoryManager


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
