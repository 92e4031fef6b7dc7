"""/status, /metrics and the console are projections of the same records: read with nothing
written in between, every figure they share is the same figure."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from engine.ledger.jobs import cancel_job, submit_job
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import PartitionState
from engine.status.history import Series, read_history
from tests.console.conftest import Farm

pytestmark = pytest.mark.django_db

P = PartitionState


def metrics(client: Client) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    return {family.name: {tuple(sorted(s.labels.items())): s.value for s in family.samples}
            for family in text_string_to_metric_families(text)}


def gauge(series: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float:
    return series[name][tuple(sorted(labels.items()))]


def lane_percent(html: str, worker: str) -> float:
    (figure,) = re.findall(rf'lane-label"[^>]*>gpu-host-a cuda:0 {worker} <b>([\d.]+)%', html)
    return float(figure)


def utilisation_of_the_hour() -> Series:
    """The worker's utilisation chart of the last hour, a bucket a minute."""
    now = timezone.now()
    (history,) = [s for s in read_history(now - timedelta(hours=1), now, 60).series if s.name.endswith("utilisation")]
    return history


def one_worker_up_an_hour(now: datetime) -> tuple[EngineHost, Worker]:
    host = EngineHost.objects.create(name="gpu-host-a", backend="cuda", started_at=now - timedelta(hours=1),
                                     heartbeat_at=now, memory_budget_bytes=1 << 30)
    return host, Worker.objects.create(host=host, device="cuda:0", ordinal=0)


def test_status_metrics_and_the_console_show_the_same_figures(staff: Client, farm: Farm) -> None:
    status = staff.get("/status").json()
    series = metrics(staff)
    page = staff.get("/").content.decode()
    (host,) = status["hosts"]

    used = host["memory"]["used_bytes"]
    assert used == gauge(series, "provingsite_memory_used_bytes", host="gpu-host-a")
    assert f'data-host="gpu-host-a" data-used-bytes="{used}"' in page

    active = host["synthesis"]["active"]
    assert active == gauge(series, "provingsite_synthesis_active", host="gpu-host-a")
    assert f"<span data-synthesis-active>{active}</span>" in page

    pending = status["counters"]["pending_partitions"]
    assert pending == gauge(series, "provingsite_pending_partitions")
    assert f"<span data-synthesis-pending>{pending}</span>" in page
    assert f"<span data-pending-partitions>{pending}</span> partitions pending" in page
    reserving = status["counters"]["reserving_partitions"]
    assert reserving == gauge(series, "provingsite_reserving_partitions")
    assert page.count('data-state="reserving"') == reserving  # one cell each, and nothing else says it

    for key in status["allocations"]["srs"]:
        state = "in use" if key["in_use"] else "evictable"
        assert f'data-circuit="{key["circuit_id"]}" data-state="{state}" data-users="{key["in_use"]}"' in page

    for worker in status["gpu_workers"]:
        labels = {"host": "gpu-host-a", "device": "cuda:0", "worker": worker["label"]}
        proving = gauge(series, "provingsite_worker_proving", **labels)
        assert proving == (worker["state"] == "proving")
        assert f'data-worker="{worker["worker_id"]}" data-state="{worker["state"]}"' in page
        share = worker["utilisation"]
        assert gauge(series, "provingsite_worker_utilisation_ratio", **labels) == pytest.approx(share, abs=0.01)
        assert lane_percent(page, worker["label"]) / 100 == pytest.approx(share, abs=0.01)


def test_after_a_restart_every_projection_says_idle_workers_were_idle(staff: Client, farm: Farm) -> None:
    now = timezone.now()
    # W0's 5 s phase ended before the host restarted 2 s ago; W1's partition was handed back.
    Partition.objects.filter(job=farm.snap, index=1).update(state=P.PENDING, host=None, worker=None,
                                                           gpu_finished_at=now - timedelta(seconds=3))
    EngineHost.objects.filter(pk=farm.host.pk).update(started_at=now - timedelta(seconds=2))
    status = staff.get("/status").json()
    series = metrics(staff)
    page = staff.get("/").content.decode()
    for worker in status["gpu_workers"]:
        labels = {"host": "gpu-host-a", "device": "cuda:0", "worker": worker["label"]}
        assert worker["utilisation"] == 0.0
        assert gauge(series, "provingsite_worker_utilisation_ratio", **labels) == 0.0
        assert lane_percent(page, worker["label"]) == 0.0


def test_a_partition_cancelled_on_the_gpu_counts_as_busy_until_then_and_no_longer(staff: Client) -> None:
    now = timezone.now()
    host, worker = one_worker_up_an_hour(now)
    job, _ = submit_job(kind="porep-c2", job_id="cancelled-on-gpu", inputs={}, num_partitions=1)
    Partition.objects.filter(job=job).update(state=P.GPU, host=host, worker=worker,
                                             gpu_started_at=now - timedelta(seconds=30))
    cancel_job(ProofJob.objects.get(pk=job.pk))  # 30 s on the GPU, then cancelled there

    status = staff.get("/status").json()
    (share,) = [w["utilisation"] for w in status["gpu_workers"]]
    assert share == pytest.approx(30 / 300, abs=0.01)
    labels = {"host": "gpu-host-a", "device": "cuda:0", "worker": "W0"}
    assert gauge(metrics(staff), "provingsite_worker_utilisation_ratio", **labels) == pytest.approx(share, abs=0.01)
    assert lane_percent(staff.get("/").content.decode(), "W0") / 100 == pytest.approx(share, abs=0.01)
    # the hour's last five minute-buckets are the same five minutes
    history = utilisation_of_the_hour()
    assert sum(history.values[-5:]) / 5 / 100 == pytest.approx(share, abs=0.01)
    assert Partition.objects.get(job=job).gpu_finished_at is not None


def test_a_legacy_row_cancelled_on_the_gpu_without_its_end_is_not_busy_for_ever(staff: Client) -> None:
    now = timezone.now()
    host, worker = one_worker_up_an_hour(now)
    job, _ = submit_job(kind="porep-c2", job_id="legacy", inputs={}, num_partitions=1)
    # written before cancels closed the interval: no gpu_finished_at, ended 90 s ago after 30 s
    Partition.objects.filter(job=job).update(state=P.CANCELLED, host=host, worker=worker,
                                             gpu_started_at=now - timedelta(seconds=120),
                                             finished_at=now - timedelta(seconds=90))
    (share,) = [w["utilisation"] for w in staff.get("/status").json()["gpu_workers"]]
    assert share == pytest.approx(30 / 300, abs=0.01)
    history = utilisation_of_the_hour()
    assert history.values[-1] == 0.0 and sum(history.values[-5:]) / 5 / 100 == pytest.approx(share, abs=0.01)


def test_each_memory_owner_is_a_jobs_a_keys_or_the_engines() -> None:
    from engine.status.holdings import PROCESSES_OWNER, compiled_owner, holder_of, key_owner, loading_owner

    assert [holder_of(o) for o in (key_owner("porep-c2/tiny"), PROCESSES_OWNER, compiled_owner("porep-c2/tiny", 0),
                                   loading_owner("porep-c2/tiny"), "porep-c2 job-7")] == \
        ["key", "engine", "engine", "engine", "job"]
