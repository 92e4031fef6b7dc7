"""GET /api/v1/stats: what the farm did over a range and what it cost, from the records."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState

pytestmark = pytest.mark.django_db


def a_proved_job(host: EngineHost, worker: Worker, job_id: str, at: timedelta) -> None:
    """A done porep-c2 job of two partitions: 100 ms queued, 0.5 s synthesis, 1 s GPU, 0.2 s finalize each."""
    t0 = timezone.now() - at
    job = ProofJob.objects.create(job_id=job_id, kind="porep-c2", circuit_id="porep-c2/tiny", state=JobState.DONE, host=host,
                                  num_partitions=2, started_at=t0, finished_at=t0 + timedelta(seconds=4))
    ProofJob.objects.filter(pk=job.pk).update(submitted_at=t0)
    for index in range(2):
        s0 = t0 + timedelta(milliseconds=100 + 2000 * index)
        Partition.objects.create(job=job, index=index, state=PartitionState.DONE, host=host, worker=worker, attempt=1,
                                 claimed_at=t0 + timedelta(milliseconds=100), synth_started_at=s0,
                                 synth_finished_at=s0 + timedelta(milliseconds=500),
                                 gpu_started_at=s0 + timedelta(milliseconds=500),
                                 gpu_finished_at=s0 + timedelta(milliseconds=1500),
                                 finished_at=s0 + timedelta(milliseconds=1700))


def a_host_that_proved(*job_ids: str, minutes_ago: int = 30) -> EngineHost:
    """A host of one worker, $3.60 an hour, 64 GiB, that proved ``job_ids`` (each as
    a_proved_job) in the last hour, a minute apart."""
    host = EngineHost.objects.create(name="gpu-a", cost_per_hour=3.6, memory_budget_bytes=64 << 30, synthesis_max=2)
    worker = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    for n, job_id in enumerate(job_ids):
        a_proved_job(host, worker, job_id, at=timedelta(minutes=minutes_ago - 10 * n))
    return host


def test_an_hours_figures_per_kind_and_per_host_with_the_cost_per_proof(operator_api: Client) -> None:
    host = EngineHost.objects.create(name="gpu-a", cost_per_hour=3.6)
    worker = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    a_proved_job(host, worker, "in-range", at=timedelta(minutes=30))
    a_proved_job(host, worker, "too-old", at=timedelta(hours=3))
    until = timezone.now()
    query = urlencode({"since": (until - timedelta(hours=1)).isoformat(), "until": until.isoformat()})
    body = operator_api.get(f"/api/v1/stats?{query}").json()
    (kind,) = body["kinds"]
    assert (kind["kind"], kind["proofs"], kind["partitions"]) == ("porep-c2", 1, 2)
    assert kind["phases"]["gpu"]["mean_ms"] == 1000 and kind["phases"]["finalize"]["p95_ms"] == 200
    assert kind["phases"]["synthesis"]["p50_ms"] == 500
    assert kind["phases"]["queue"]["mean_ms"] == 100 + 0  # both claimed 100 ms after submission
    (figures,) = body["hosts"]
    assert figures["proofs_per_hour"] == pytest.approx(1.0, rel=1e-3)
    assert figures["device_busy"] == pytest.approx(2.0 / 3600, rel=1e-2)  # 2 s of GPU in an hour on one slot
    assert figures["cost_per_proof"] == pytest.approx(3.6, rel=1e-3) == kind["cost_per_proof"]
    # the job took 4 s from its first claim: as expected of its circuit, farm-wide and on gpu-a
    assert body["circuits"] == [{"circuit_id": "porep-c2/tiny", "host": None, "jobs": 1, "p50_s": 4.0, "p95_s": 4.0},
                                {"circuit_id": "porep-c2/tiny", "host": "gpu-a", "jobs": 1, "p50_s": 4.0, "p95_s": 4.0}]


def test_the_farms_figures_are_for_operator_tokens(api: Client) -> None:
    response = api.get("/api/v1/stats")
    assert response.status_code == 403 and response.json()["field"] == "Authorization"
