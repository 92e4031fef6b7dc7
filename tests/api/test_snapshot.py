"""farm_snapshot(): the seed's status fields for every host, read from the records alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition, StatusClock, Worker
from engine.states import JobState, PartitionState
from engine.status.farm import farm_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def host() -> EngineHost:
    now = timezone.now()
    return EngineHost.objects.create(
        name="gpu-a", backend="cuda", started_at=now - timedelta(seconds=100), heartbeat_at=now,
        memory_budget_bytes=1000, memory_total_bytes=4000, synthesis_max=4,
        devices=[{"device": "cuda:0", "memory_total_bytes": 100, "memory_free_bytes": 40}],
        key_cache=[{"circuit_id": "porep-c2/tiny", "bytes": 50}],
    )


def test_a_worker_is_proving_exactly_when_a_partition_on_the_gpu_names_it(host: EngineHost) -> None:
    w0 = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    Worker.objects.create(host=host, device="cuda:0", ordinal=1)
    job, _ = submit_job(kind="porep-c2", job_id="porep-c2-long-job-id-0001", inputs={}, num_partitions=10)
    Partition.objects.filter(job=job, index=3).update(
        state=PartitionState.GPU, worker=w0, host=host, gpu_started_at=timezone.now() - timedelta(seconds=2))
    workers = {w["label"]: w for w in farm_snapshot()["gpu_workers"]}
    assert workers["W0"]["state"] == "proving"
    assert workers["W0"]["current_job"] == "porep-c2-long-job-id-0001"
    assert workers["W0"]["current_partition"] == 3
    assert workers["W0"]["gpu_ordinal"] == 0
    assert workers["W0"]["busy_secs"] >= 2
    assert workers["W1"]["state"] == "idle" and workers["W1"]["current_job"] is None


def test_the_snapshot_carries_the_seed_fields_per_host_and_summed(host: EngineHost) -> None:
    job, _ = submit_job(kind="porep-c2", job_id="synth-1", inputs={}, num_partitions=2)
    Partition.objects.filter(job=job, index=0).update(state=PartitionState.SYNTHESIZING, host=host, reserved_bytes=200)
    snap = farm_snapshot()
    for scope in (snap, snap["hosts"][0]):
        assert {"uptime_secs", "memory", "synthesis", "pipelines", "gpu_workers", "allocations",
                "counters"} <= set(scope)
        assert scope["memory"]["available_bytes"] == 750  # 200 reserved by the partition, 50 by its key
        assert scope["synthesis"] == {"max_concurrent": 4, "active": 1}
        assert scope["allocations"]["srs"][0]["circuit_id"] == "porep-c2/tiny"
        assert scope["allocations"]["srs"][0]["evictable"] is False
    row = snap["hosts"][0]
    assert row["stale"] is False
    assert row["devices"][0]["used_bytes"] == 60


def test_a_host_whose_heartbeat_stopped_is_stale(host: EngineHost) -> None:
    EngineHost.objects.filter(pk=host.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert farm_snapshot()["hosts"][0]["stale"] is True


def test_pipelines_show_full_job_ids_and_partition_timings() -> None:
    job, _ = submit_job(kind="snap-update", job_id="snap-update-sector-000042-update", inputs={}, num_partitions=16)
    start = timezone.now() - timedelta(seconds=3)
    Partition.objects.filter(job=job, index=0).update(
        state=PartitionState.DONE, synth_started_at=start, synth_finished_at=start + timedelta(milliseconds=587),
        gpu_started_at=start + timedelta(seconds=1), gpu_finished_at=start + timedelta(seconds=2.5))
    (pipe,) = farm_snapshot()["pipelines"]
    assert pipe["job_id"] == "snap-update-sector-000042-update"
    assert pipe["proof_kind"] == "snap-update"
    assert (pipe["partitions_done"], pipe["total_partitions"]) == (1, 16)
    assert pipe["partitions"][0]["synth_ms"] == 587
    assert pipe["partitions"][0]["gpu_ms"] == 1500


def test_counters_count_jobs_by_kind_and_state() -> None:
    for n, state in enumerate([JobState.DONE, JobState.DONE, JobState.FAILED, JobState.QUEUED]):
        job, _ = submit_job(kind="winning-post", job_id=f"w-{n}", inputs={"n": n}, num_partitions=1)
        job.state = state
        job.save()
    counters = farm_snapshot()["counters"]
    assert counters["total_completed"] == 2
    assert counters["completed_by_kind"] == {"winning-post": 2}
    assert counters["failed_by_kind"] == {"winning-post": 1}
    assert counters["queue_depth"] == 1


@pytest.mark.django_db(transaction=True)  # read as /status is: outside any caller's transaction
def test_the_snapshot_names_the_farm_version_it_was_read_at_the_sum_of_every_writers_clock() -> None:
    StatusClock.objects.create(source="web", value=41)
    StatusClock.objects.create(source="host:gpu-a", value=9)
    snap = farm_snapshot()
    assert snap["version"] == 50 and snap["consistent"] is True


def test_a_read_inside_a_callers_read_committed_transaction_does_not_claim_one_snapshot() -> None:
    from django.db import connection

    snap = farm_snapshot()  # pytest-django runs this test inside its own transaction
    assert snap["consistent"] is (connection.vendor == "sqlite")


def test_synthesis_counts_the_partitions_synthesizing_not_the_hosts_counter(host: EngineHost) -> None:
    job, _ = submit_job(kind="porep-c2", job_id="synth-2", inputs={}, num_partitions=3)
    Partition.objects.filter(job=job, index__lt=2).update(state=PartitionState.SYNTHESIZING, host=host)
    assert farm_snapshot()["synthesis"]["active"] == 2


def test_memory_is_what_the_claimed_partitions_and_resident_keys_hold(host: EngineHost) -> None:
    job, _ = submit_job(kind="porep-c2", job_id="held", inputs={}, num_partitions=3)
    Partition.objects.filter(job=job, index=0).update(state=PartitionState.GPU, host=host, reserved_bytes=300,
                                                      worker=Worker.objects.create(host=host, device="cuda:0", ordinal=0))
    Partition.objects.filter(job=job, index=1).update(state=PartitionState.DONE, host=host, reserved_bytes=300)
    Partition.objects.filter(job=job, index=2).update(state=PartitionState.RESERVING, host=host)
    (row,) = farm_snapshot()["hosts"]
    # the finished partition holds nothing; the reserving one holds nothing yet
    assert row["memory"]["by_owner"] == {"porep-c2 held": 300, "key:porep-c2/tiny": 50}
    assert row["memory"]["used_bytes"] == 350
    assert row["counters"]["reserving_partitions"] == 1


def test_a_key_nobody_has_claimed_work_for_is_evictable_and_shows_no_use(host: EngineHost) -> None:
    (key,) = farm_snapshot()["allocations"]["srs"]
    assert (key["in_use"], key["evictable"], key["last_used_secs_ago"]) == (0, True, None)


def test_utilisation_after_a_restart_counts_only_busy_time_since_it(host: EngineHost) -> None:
    now = timezone.now()
    w0 = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    job, _ = submit_job(kind="porep-c2", job_id="before-restart", inputs={}, num_partitions=1)
    # 60 s of GPU work that ended just before the host restarted 10 s ago; idle since.
    Partition.objects.filter(job=job).update(state=PartitionState.DONE, worker=w0, host=host,
                                             gpu_started_at=now - timedelta(seconds=72),
                                             gpu_finished_at=now - timedelta(seconds=12))
    EngineHost.objects.filter(pk=host.pk).update(started_at=now - timedelta(seconds=10))
    (worker,) = farm_snapshot()["gpu_workers"]
    assert worker["state"] == "idle"
    assert worker["utilisation"] == 0.0


# A built-in job names no circuit (its host's scale decides it); a registered circuit's job does.
@pytest.mark.parametrize("job_circuit", ["", "window-post/tiny"])
def test_a_key_whose_circuit_is_on_the_gpu_is_in_use(host: EngineHost, job_circuit: str) -> None:
    EngineHost.objects.filter(pk=host.pk).update(key_cache=[{"circuit_id": "window-post/tiny", "bytes": 50}])
    w0 = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    job, _ = submit_job(kind="window-post", job_id="wp-1", inputs={}, num_partitions=1, circuit_id=job_circuit)
    Partition.objects.filter(job=job).update(state=PartitionState.GPU, worker=w0, host=host,
                                             gpu_started_at=timezone.now())
    (key,) = farm_snapshot()["allocations"]["srs"]
    assert key["in_use"] == 1 and key["evictable"] is False
    from engine.console.reads import keys_context
    from engine.status.read_model import live_farm

    with live_farm() as farm:
        (chip,) = keys_context(farm)["chips"]
    assert chip["state"] == "in use"
