"""The engine's running figures take constant memory however many partitions it proves."""

from __future__ import annotations

import sys
import threading

from engine.pipeline.inflight import Stats


def test_a_million_completed_partitions_keep_one_sum_per_phase() -> None:
    stats = Stats()
    timings = {"synth_s": 0.25, "gpu_s": 0.01, "finish_s": 0.002}
    stats.add_timings(timings)
    size = sys.getsizeof(stats.timing_sums)
    for _ in range(1_000_000 - 1):
        stats.add_timings(timings)
    assert stats.completed == 1_000_000
    assert sys.getsizeof(stats.timing_sums) == size and len(stats.timing_sums) == 3
    assert abs(stats.mean_ms("synth_s") - 250.0) < 1e-6


def test_completions_from_several_finalizer_threads_are_all_counted() -> None:
    stats = Stats()

    def finish_many() -> None:
        for _ in range(20_000):
            stats.add_timings({"gpu_s": 0.001})

    threads = [threading.Thread(target=finish_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stats.completed == 80_000
    assert abs(stats.timing_sums["gpu_s"] - 80.0) < 1e-6
