"""A key is hot (in memory), warm (its points memory-mapped from an image on disk) or cold (on
disk only). Under memory pressure the cache demotes idle keys a tier at a time, least recently
used first within a tier, and every change is written to the host row with the key's tier; a
warm key proves proofs that verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.circuits.kinds import circuit_for
from engine.pipeline import keys
from engine.pipeline.keycache import KeyCache, KeyControlRefused, KeyTier
from engine.pipeline.keymap import map_key
from engine.pipeline.memory import MemoryManager

SMALL = ("winning-post/tiny", "window-post/tiny")


def real_cache(budget: int, images: Path, reports: list[list[tuple[str, str]]] | None = None) -> KeyCache:
    cache: KeyCache

    def report() -> None:
        if reports is not None:
            reports.append([(k["circuit_id"], k["tier"]) for k in cache.snapshot()])

    cache = KeyCache(MemoryManager(budget), keys.load_proving_key, on_change=report, sizer=keys.held_nbytes,
                     mapper=lambda key, circuit_id: map_key(key, images, circuit_id))
    return cache


def estimate(circuit_id: str) -> int:
    kind, scale = circuit_id.split("/")
    needs = circuit_for(kind, scale).memory
    return int(needs.key_bytes + keys.table_bytes(needs))


def load_and_idle(cache: KeyCache, circuit_id: str) -> None:
    cache.checkout(circuit_id, estimate(circuit_id))
    cache.check_in(circuit_id)


def test_under_pressure_idle_keys_go_hot_to_warm_before_any_goes_warm_to_cold(engine_params, tmp_path) -> None:
    reports: list[list[tuple[str, str]]] = []
    cache = real_cache(1 << 30, tmp_path, reports)
    for circuit_id in SMALL:
        load_and_idle(cache, circuit_id)
    hot = {c: cache.reserved_bytes(c) for c in SMALL}

    # all the budget but a byte is asked for: every idle key must give way, in tier order
    freed = cache.evict(sum(hot.values()))
    assert cache.demotions == [
        ("winning-post/tiny", KeyTier.HOT, KeyTier.WARM), ("window-post/tiny", KeyTier.HOT, KeyTier.WARM),
        ("winning-post/tiny", KeyTier.WARM, KeyTier.COLD), ("window-post/tiny", KeyTier.WARM, KeyTier.COLD)]
    assert freed == sum(hot.values()) and cache.memory.used == 0 and cache.snapshot() == []
    assert reports[-1] == []


def test_a_warm_key_is_charged_only_what_stays_in_memory_and_says_what_it_maps(engine_params, tmp_path) -> None:
    cache = real_cache(1 << 30, tmp_path)
    load_and_idle(cache, "winning-post/tiny")
    hot_bytes = cache.reserved_bytes("winning-post/tiny")
    cache.evict(1)  # the least pressure: one key one tier down
    (entry,) = cache.snapshot()
    assert entry["tier"] == "warm" and 0 < entry["bytes"] < hot_bytes
    assert entry["mapped_bytes"] > 0 and entry["bytes"] + entry["mapped_bytes"] < hot_bytes  # no tables when warm
    assert cache.memory.used == entry["bytes"]
    assert entry["load_seconds"] > 0 and entry["last_used_at"] is not None


def test_a_key_in_use_is_never_demoted(engine_params, tmp_path) -> None:
    cache = real_cache(1 << 30, tmp_path)
    cache.checkout("winning-post/tiny", estimate("winning-post/tiny"))
    assert cache.evict(1 << 30) == 0 and cache.tier("winning-post/tiny") is KeyTier.HOT
    with pytest.raises(KeyControlRefused, match="in use by 1 partition"):
        cache.demote("winning-post/tiny", KeyTier.COLD)


def test_a_preload_that_does_not_fit_the_free_budget_is_refused_naming_both_figures(engine_params, tmp_path) -> None:
    need = estimate("window-post/tiny")
    cache = real_cache(need - 1, tmp_path)
    with pytest.raises(KeyControlRefused, match=f"needs .* \\({need} bytes\\) but .* \\({need - 1} bytes\\)"):
        cache.preload("window-post/tiny", KeyTier.HOT, need)
    assert cache.snapshot() == [] and cache.memory.used == 0


def test_preload_to_warm_then_hot_and_evict_to_cold_move_the_key_between_tiers(engine_params, tmp_path) -> None:
    cache = real_cache(1 << 30, tmp_path)
    cache.preload("winning-post/tiny", KeyTier.WARM, estimate("winning-post/tiny"))
    assert cache.tier("winning-post/tiny") is KeyTier.WARM
    cache.preload("winning-post/tiny", KeyTier.HOT, estimate("winning-post/tiny"))
    assert cache.tier("winning-post/tiny") is KeyTier.HOT
    cache.demote("winning-post/tiny", KeyTier.COLD)
    assert cache.tier("winning-post/tiny") is KeyTier.COLD and cache.memory.used == 0


@pytest.mark.django_db(transaction=True)
def test_a_warm_key_proves_a_job_whose_proofs_verify_and_the_host_row_shows_it_warm(start_engine) -> None:
    from engine.circuits.kinds import demo_inputs, validate_inputs
    from engine.ledger.submission import Submission, submit
    from engine.models import EngineHost
    from engine.states import JobState

    engine = start_engine(synthesis=1, workers_per_device=1)
    circuit_id = circuit_for("winning-post", "tiny").circuit_id
    engine.keycache.preload(circuit_id, KeyTier.WARM, estimate(circuit_id))
    row = EngineHost.objects.get(pk=engine.host.pk)
    assert [(k["circuit_id"], k["tier"]) for k in row.key_cache] == [(circuit_id, "warm")]

    inputs, n = validate_inputs("winning-post", demo_inputs("winning-post"))
    job, _ = submit(Submission(kind="winning-post", job_id="warm-1", inputs=inputs, num_partitions=n,
                               circuit_id=circuit_id, scale="tiny"))
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified, job.error
    assert engine.keycache.tier(circuit_id) is KeyTier.WARM  # proved from the map, not reloaded


def test_a_preload_to_warm_leaves_a_hot_key_hot(engine_params, tmp_path) -> None:
    cache = real_cache(1 << 30, tmp_path)
    load_and_idle(cache, "winning-post/tiny")
    cache.preload("winning-post/tiny", KeyTier.WARM, estimate("winning-post/tiny"))
    assert cache.tier("winning-post/tiny") is KeyTier.HOT and cache.demotions == []


@pytest.mark.django_db(transaction=True)
def test_an_engine_short_of_memory_demotes_its_idle_key_to_warm_and_its_row_says_so(start_engine) -> None:
    from engine.circuits.kinds import demo_inputs, validate_inputs
    from engine.ledger.submission import Submission, submit
    from engine.models import EngineHost
    from engine.states import JobState

    idle, wanted = "winning-post/tiny", "window-post/tiny"
    hot = keys.held_nbytes(keys.load_proving_key(idle))
    needs = circuit_for("window-post", "tiny").memory
    partition = int(needs.partition_bytes)
    # room for the wanted key hot and one partition beside the idle key warm, not beside it hot
    budget = keys.held_nbytes(keys.load_proving_key(wanted)) + partition + hot // 2
    engine = start_engine(synthesis=1, workers_per_device=1, budget=str(budget))
    engine.keycache.preload(idle, KeyTier.HOT, estimate(idle))

    inputs, n = validate_inputs("window-post", demo_inputs("window-post"))
    job, _ = submit(Submission(kind="window-post", job_id="pressure-1", inputs=inputs, num_partitions=1,
                               circuit_id=wanted, scale="tiny"))
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == JobState.DONE and job.verified, job.error
    assert (idle, KeyTier.HOT, KeyTier.WARM) in engine.keycache.demotions
    row = EngineHost.objects.get(pk=engine.host.pk)
    assert {k["circuit_id"]: k["tier"] for k in row.key_cache}[idle] == "warm"
