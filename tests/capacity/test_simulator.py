"""The capacity simulator on hand-built arrivals whose answers are known, and its invariants."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.status.capacity_sim import Arrival, HostShape, Outcome, Profile, Scenario, Service, simulate

GiB = 1 << 30
ONE_WORKER = HostShape(memory_budget=64 * GiB, synthesis=1, devices=1, workers_per_device=1, claim_poll_s=0.0)


def fixed(synth: float = 1.0, device: float = 10.0, finalize: float = 0.0, memory: int = GiB, abc: int = 0,
          dispatch: float = 0.0) -> dict[str, Profile]:
    return {"c": Profile((Service(synth, device, finalize),), memory_bytes=memory, abc_bytes=abc,
                         dispatch_s=dispatch)}


def jobs(n: int, at: float = 0.0, **extra: object) -> list[Arrival]:
    return [Arrival(f"j{i}", at, "c", **extra) for i in range(n)]  # type: ignore[arg-type]


def replay(arrivals: list[Arrival], profiles: dict[str, Profile], host: HostShape = ONE_WORKER, hosts: int = 1,
           **extra: object) -> Outcome:
    return simulate(Scenario(arrivals, profiles, host, hosts=hosts, **extra))  # type: ignore[arg-type]


def done_waits(outcome: Outcome) -> dict[str, float | None]:
    return {j.job: j.done_wait_s for j in outcome.jobs}


def test_one_worker_serves_a_backlog_first_in_first_out_with_exact_waits() -> None:
    # 1 s of synthesis on one slot; the pacer (1 slot + 2 × 1 worker) lets three wait at most,
    # so the fifth job is claimed only when the first leaves the device at 11 s.
    outcome = replay(jobs(5), fixed())
    assert [j.claim_wait_s for j in outcome.jobs] == [0.0, 1.0, 2.0, 3.0, 11.0]
    assert [j.done_wait_s for j in outcome.jobs] == [11.0, 21.0, 31.0, 41.0, 51.0]
    assert outcome.partitions_done == 5 and outcome.end_s == 51.0


def test_room_a_proving_worker_makes_is_seen_at_the_dispatchers_next_poll() -> None:
    # Asleep since 4 s (the pacer's limit); the worker takes the next partition at 11.5 s, which
    # notifies nobody: the dispatcher sees the room at its poll, 12 s, or at once with no poll.
    polled = HostShape(memory_budget=64 * GiB, synthesis=1, devices=1, workers_per_device=1, claim_poll_s=1.0)
    instant = HostShape(memory_budget=64 * GiB, synthesis=1, devices=1, workers_per_device=1, claim_poll_s=0.0)
    assert replay(jobs(5), fixed(device=10.5), host=polled).jobs[4].claim_wait_s == 12.0
    assert replay(jobs(5), fixed(device=10.5), host=instant).jobs[4].claim_wait_s == 11.5


def test_split_proving_lets_the_device_take_the_next_partition_while_the_last_is_finished() -> None:
    split = done_waits(replay(jobs(3), fixed(synth=0.0, finalize=5.0)))
    held = done_waits(replay(jobs(3), fixed(synth=0.0, finalize=5.0), host=HostShape(
        memory_budget=64 * GiB, synthesis=1, devices=1, workers_per_device=1, split=False)))
    assert split == {"j0": 15.0, "j1": 25.0, "j2": 35.0}
    assert held == {"j0": 15.0, "j1": 30.0, "j2": 45.0}


def test_two_workers_on_one_device_take_turns_at_its_lock() -> None:
    two = HostShape(memory_budget=64 * GiB, synthesis=2, devices=1, workers_per_device=2)
    assert done_waits(replay(jobs(2), fixed(synth=0.0), host=two)) == {"j0": 10.0, "j1": 20.0}
    two_devices = HostShape(memory_budget=64 * GiB, synthesis=2, devices=2, workers_per_device=1)
    assert done_waits(replay(jobs(2), fixed(synth=0.0), host=two_devices)) == {"j0": 10.0, "j1": 10.0}


def test_a_higher_priority_job_is_claimed_before_older_normal_ones() -> None:
    # j0 is claimed the moment it arrives; the urgent job, submitted last, overtakes the others.
    arrivals = [*jobs(6, priority=2), Arrival("urgent", 0.0, "c", priority=0)]
    waits = done_waits(replay(arrivals, fixed()))
    assert (waits["j0"], waits["urgent"], waits["j1"]) == (11.0, 21.0, 31.0)


def test_within_a_priority_the_least_slack_goes_first() -> None:
    arrivals = [*jobs(6), Arrival("tight", 0.0, "c", deadline_s=30.0, latest_start_s=5.0),
                Arrival("loose", 0.0, "c", deadline_s=300.0, latest_start_s=200.0)]
    order = sorted(replay(arrivals, fixed()).jobs, key=lambda j: j.done_wait_s or 0.0)
    assert [j.job for j in order[:3]] == ["j0", "tight", "loose"]  # j0 was claimed as it arrived


def test_a_tighter_memory_budget_makes_the_waits_longer() -> None:
    host = HostShape(memory_budget=8 * GiB, synthesis=4, devices=2, workers_per_device=2)
    tight = HostShape(memory_budget=2 * GiB, synthesis=4, devices=2, workers_per_device=2)
    arrivals = [Arrival(f"j{i}", i * 2.0, "c", partitions=4) for i in range(10)]
    roomy = done_waits(replay(arrivals, fixed(synth=3.0, device=2.0, finalize=1.0), host=host))
    short = done_waits(replay(arrivals, fixed(synth=3.0, device=2.0, finalize=1.0), host=tight))
    assert statistics.median(w for w in short.values() if w) > statistics.median(w for w in roomy.values() if w)


def test_the_abc_share_is_released_when_a_partition_leaves_the_device() -> None:
    # 3 GiB budget, 2 GiB a partition of which 1 GiB leaves with the device: the next one's
    # synthesis may start while the first is still finishing.
    host = HostShape(memory_budget=3 * GiB, synthesis=2, devices=1, workers_per_device=1)
    kept = done_waits(replay(jobs(2), fixed(synth=1.0, device=1.0, finalize=10.0, memory=2 * GiB), host=host))
    freed = done_waits(replay(jobs(2), fixed(synth=1.0, device=1.0, finalize=10.0, memory=2 * GiB, abc=GiB),
                              host=host))
    assert kept == {"j0": 12.0, "j1": 24.0}
    assert freed == {"j0": 12.0, "j1": 14.0}


def test_more_hosts_never_make_the_median_wait_longer() -> None:
    profiles = {"c": Profile((Service(0.5, 2.0, 0.3), Service(0.8, 3.5, 0.2), Service(0.4, 1.0, 0.5)),
                             memory_bytes=GiB)}
    arrivals = [Arrival(f"j{i}", i * 0.7, "c", partitions=1 + i % 4, priority=i % 3) for i in range(60)]
    medians = [statistics.median(w for w in done_waits(replay(arrivals, profiles, hosts=n)).values() if w is not None)
               for n in range(1, 6)]
    assert medians == sorted(medians, reverse=True), medians


def test_deadlines_missed_are_counted() -> None:
    arrivals = [Arrival("in-time", 0.0, "c", deadline_s=12.0), Arrival("late", 0.0, "c", deadline_s=12.0),
                Arrival("no-deadline", 0.0, "c")]
    outcome = replay(arrivals, fixed())
    assert {j.job: j.missed for j in outcome.jobs} == {"in-time": False, "late": True, "no-deadline": None}
    assert outcome.missed == 1


def test_a_partition_larger_than_the_budget_fails_its_job_and_the_rest_still_run() -> None:
    profiles = {"c": Profile((Service(1.0, 10.0, 0.0),), memory_bytes=GiB),
                "huge": Profile((Service(1.0, 10.0, 0.0),), memory_bytes=128 * GiB)}
    outcome = replay([Arrival("huge", 0.0, "huge", partitions=2), Arrival("fits", 0.0, "c")], profiles)
    by_job = {j.job: j for j in outcome.jobs}
    assert by_job["huge"].failed and by_job["huge"].done_wait_s is None
    assert by_job["fits"].done_wait_s == 11.0
    assert (outcome.partitions_done, outcome.partitions_failed) == (1, 2)


def test_cost_per_proof_is_the_hosts_cost_over_the_span_shared_by_the_proofs() -> None:
    host = HostShape(memory_budget=64 * GiB, synthesis=1, devices=1, workers_per_device=1, cost_per_hour=3.6)
    outcome = replay(jobs(2), fixed(), host=host, hosts=2, span_s=3600.0)
    assert outcome.proofs == 2 and outcome.cost_per_proof == 3.6  # 2 hosts × 3.6 × 1 h / 2 proofs
    assert outcome.proofs_per_hour == 2.0


def test_a_farm_that_opens_late_makes_the_early_arrivals_wait_for_it() -> None:
    assert done_waits(replay(jobs(1), fixed(), opens_s=5.0)) == {"j0": 16.0}


def test_the_same_seed_replays_the_same_service_times() -> None:
    profiles = {"c": Profile(tuple(Service(0.1 * i, 1.0 + i, 0.1) for i in range(10)), memory_bytes=GiB)}
    arrivals = [Arrival(f"j{i}", float(i), "c", partitions=3) for i in range(20)]
    assert replay(arrivals, profiles, seed=7) == replay(arrivals, profiles, seed=7)


def test_the_simulator_runs_without_django() -> None:
    script = ("import sys, engine.status.capacity_sim; "
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


# ---- invariants -------------------------------------------------------------------------------

services = st.builds(Service, st.floats(0, 5), st.floats(0, 5), st.floats(0, 5))
profiles = st.builds(Profile, st.lists(services, min_size=1, max_size=4).map(tuple),
                     memory_bytes=st.integers(0, 8 * GiB), abc_bytes=st.integers(0, GiB),
                     key_bytes=st.integers(0, GiB), dispatch_s=st.floats(0, 0.5))
shapes = st.builds(HostShape, memory_budget=st.integers(1, 16 * GiB), synthesis=st.integers(1, 4),
                   devices=st.integers(1, 3), workers_per_device=st.integers(1, 3), split=st.booleans(),
                   claim_poll_s=st.sampled_from([0.0, 0.2, 1.0]))
arrival_lists = st.lists(st.builds(Arrival, job=st.uuids().map(str), at_s=st.floats(0, 100),
                                   circuit=st.sampled_from(["a", "b"]), partitions=st.integers(1, 6),
                                   priority=st.integers(0, 3), deadline_s=st.none() | st.floats(0, 200),
                                   latest_start_s=st.none() | st.floats(-50, 200)), max_size=25)


@settings(max_examples=150, deadline=None)
@given(arrivals=arrival_lists, a=profiles, b=profiles, host=shapes, hosts=st.integers(1, 4),
       opens=st.floats(0, 20))
def test_every_job_ends_no_wait_is_negative_and_no_partition_is_lost(
        arrivals: list[Arrival], a: Profile, b: Profile, host: HostShape, hosts: int, opens: float) -> None:
    outcome = simulate(Scenario(arrivals, {"a": a, "b": b}, host, hosts=hosts, opens_s=opens))
    assert len(outcome.jobs) == len(arrivals)
    assert outcome.partitions_done + outcome.partitions_failed == sum(x.partitions for x in arrivals)
    for job in outcome.jobs:
        assert job.failed or job.done_wait_s is not None  # every job finishes, or fails for its memory
        assert job.claim_wait_s is not None and job.claim_wait_s >= 0
        if job.done_wait_s is not None:
            assert job.done_wait_s >= job.claim_wait_s
    assert outcome.proofs == sum(1 for job in outcome.jobs if not job.failed)


def test_a_job_that_brings_its_own_recorded_phases_is_replayed_with_them() -> None:
    profiles = fixed()  # 10 s on the device, drawn
    own = Arrival("traced", 0.0, "c", partitions=2, services=(Service(1.0, 2.0, 0.0), Service(1.0, 3.0, 0.0)))
    waits = done_waits(replay([own, Arrival("drawn", 0.0, "c")], profiles))
    assert waits == {"traced": 6.0, "drawn": 16.0}
