"""/status (JSON, validated against the committed schema) and /metrics (Prometheus text)."""

from __future__ import annotations

from datetime import timedelta

import jsonschema
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from engine.api.status import status_schema
from engine.format import iso_moment
from engine.ledger.jobs import submit_job
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState
from engine.status.host_report import DeviceFigures, HostFigures

pytestmark = pytest.mark.django_db


@pytest.fixture
def farm() -> None:
    """A host with two workers, W0 proving partition 2 of a porep job, one job done."""
    now = timezone.now()
    host = EngineHost.objects.create(
        name="gpu-a", backend="cuda", started_at=now - timedelta(minutes=3), heartbeat_at=now,
        memory_budget_bytes=64 << 30, memory_total_bytes=128 << 30, synthesis_max=2,
        devices=[{"device": "cuda:0", "memory_total_bytes": 80 << 30, "memory_free_bytes": 70 << 30}],
        key_cache=[{"circuit_id": "porep-c2/tiny", "bytes": 1 << 20}])
    w0 = Worker.objects.create(host=host, device="cuda:0", ordinal=0)
    Worker.objects.create(host=host, device="cuda:0", ordinal=1)
    live, _ = submit_job(kind="porep-c2", job_id="porep-live", inputs={}, num_partitions=10)
    ProofJob.objects.filter(pk=live.pk).update(state=JobState.RUNNING, started_at=now - timedelta(seconds=30))
    Partition.objects.filter(job=live, index=2).update(
        state=PartitionState.GPU, worker=w0, host=host, reserved_bytes=7 << 30, synth_started_at=now - timedelta(seconds=5),
        synth_finished_at=now - timedelta(seconds=4), gpu_started_at=now - timedelta(seconds=1))
    Partition.objects.filter(job=live, index=3).update(state=PartitionState.SYNTHESIZING, host=host, reserved_bytes=7 << 30,
                                                      synth_started_at=now - timedelta(seconds=1))
    done, _ = submit_job(kind="winning-post", job_id="win-done", inputs={}, num_partitions=1)
    ProofJob.objects.filter(pk=done.pk).update(state=JobState.DONE, finished_at=now, host=host)
    Partition.objects.filter(job=done).update(
        state=PartitionState.DONE, synth_started_at=now - timedelta(seconds=3), synth_finished_at=now - timedelta(seconds=2),
        gpu_started_at=now - timedelta(seconds=2), gpu_finished_at=now - timedelta(seconds=1), finished_at=now)
    submit_job(kind="snap-update", job_id="snap-queued", inputs={}, num_partitions=16)


def test_status_matches_the_committed_schema(farm: None, operator_api: Client) -> None:
    response = operator_api.get("/status")
    assert response.status_code == 200
    jsonschema.validate(response.json(), status_schema(), format_checker=jsonschema.FormatChecker())


def test_status_shows_the_worker_proving_what_the_records_say(farm: None, operator_api: Client) -> None:
    workers = {w["label"]: w for w in operator_api.get("/status").json()["gpu_workers"]}
    assert (workers["W0"]["state"], workers["W0"]["current_job"], workers["W0"]["current_partition"]) == \
        ("proving", "porep-live", 2)
    assert workers["W1"]["state"] == "idle"


def test_status_of_an_empty_farm_matches_the_schema_too(operator_api: Client) -> None:
    jsonschema.validate(operator_api.get("/status").json(), status_schema())


def test_status_is_forbidden_to_a_client_token_it_names_every_client_s_jobs(api: Client) -> None:
    # the token is valid (no 401): its scope is what is refused
    response = api.get("/status")
    assert response.status_code == 403 and "operator token" in response.json()["detail"]


def test_status_is_refused_without_a_token_or_a_login(anonymous: Client) -> None:
    response = anonymous.get("/status")
    assert response.status_code == 401 and response.json()["field"] == "Authorization"


def test_status_is_readable_by_a_logged_in_operator(anonymous: Client) -> None:
    User.objects.create_user("op", password="pw-long-enough", is_staff=True)
    anonymous.login(username="op", password="pw-long-enough")
    assert anonymous.get("/status").status_code == 200


def test_status_refuses_a_revoked_token(operator_api: Client) -> None:
    from engine.ledger.tokens import revoke_token

    assert operator_api.get("/status").status_code == 200
    revoke_token("farm-dashboard")
    assert operator_api.get("/status").status_code == 401


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_parse_as_prometheus_text_with_the_farm_in_them(farm: None, anonymous: Client) -> None:
    response = anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    families = _families(response.content.decode())
    completed = {s.labels["kind"]: s.value for s in families["provingsite_proofs_completed"].samples
                 if s.name.endswith("_total")}
    assert completed == {"winning-post": 1}
    assert families["provingsite_queue_depth"].samples[0].value == 1
    used = {s.labels["host"]: s.value for s in families["provingsite_memory_used_bytes"].samples}
    assert used == {"gpu-a": (14 << 30) + (1 << 20)}  # two partitions of 7 GiB and the resident key
    proving = {s.labels["worker"]: s.value for s in families["provingsite_worker_proving"].samples}
    assert proving == {"W0": 1, "W1": 0}
    keys = families["provingsite_key_cache_bytes"].samples
    assert keys[0].labels["circuit_id"] == "porep-c2/tiny" and keys[0].value == 1 << 20


def test_metrics_histograms_come_from_the_partition_timestamps(farm: None, anonymous: Client) -> None:
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    gpu = [s for s in families["provingsite_phase_duration_seconds"].samples
           if s.labels.get("phase") == "gpu" and s.labels.get("kind") == "winning-post"]
    count = next(s.value for s in gpu if s.name.endswith("_count"))
    total = next(s.value for s in gpu if s.name.endswith("_sum"))
    assert count == 1 and total == pytest.approx(1.0, abs=0.01)
    proof = [s for s in families["provingsite_proof_duration_seconds"].samples if s.name.endswith("_count")]
    assert [s.value for s in proof] == [1]


def test_metrics_are_refused_to_an_address_not_allowed(anonymous: Client) -> None:
    assert anonymous.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403


def test_metrics_accept_the_metrics_token_from_anywhere(anonymous: Client, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "METRICS_TOKEN": "scrape-secret", "METRICS_ALLOW": []}
    assert anonymous.get("/metrics", REMOTE_ADDR="203.0.113.9",
                         headers={"Authorization": "Bearer scrape-secret"}).status_code == 200
    assert anonymous.get("/metrics", REMOTE_ADDR="203.0.113.9",
                         headers={"Authorization": "Bearer wrong"}).status_code == 403


def test_the_committed_status_schema_is_itself_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(status_schema())


def test_metrics_histogram_buckets_count_every_span_up_to_each_bound(anonymous: Client) -> None:
    from engine.status.histograms import PHASE_BUCKETS

    spans = [0.004, 0.01, 0.3, 2.5, 400.0, -1.0]  # bounds count as "le"; a negative span (skewed clocks) as 0
    job, _ = submit_job(kind="porep-c2", job_id="spans", inputs={}, num_partitions=len(spans))
    now = timezone.now()
    for index, span in enumerate(spans):
        Partition.objects.filter(job=job, index=index).update(
            synth_started_at=now, gpu_started_at=now, gpu_finished_at=now + timedelta(seconds=span))
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    gpu = {(s.name, s.labels.get("le")): s.value for s in families["provingsite_phase_duration_seconds"].samples
           if s.labels.get("phase") == "gpu"}
    for bound in PHASE_BUCKETS:
        expected = sum(1 for span in spans if max(span, 0.0) <= bound)
        assert gpu[("provingsite_phase_duration_seconds_bucket", repr(bound))] == expected, bound
    assert gpu[("provingsite_phase_duration_seconds_bucket", "+Inf")] == len(spans)
    assert gpu[("provingsite_phase_duration_seconds_count", None)] == len(spans)
    assert gpu[("provingsite_phase_duration_seconds_sum", None)] == pytest.approx(sum(max(s, 0.0) for s in spans))


@pytest.fixture
def deadlines() -> None:
    """porep-c2/tiny takes 30 s on this farm (its record); a job late by 3 s, one queued with
    10 s to its deadline (at risk), one with ten minutes (on time), one without; two finished
    after their deadline (a porep-c2 done, a winning-post failed) and one before it."""
    now = timezone.now()
    for i in range(3):
        ProofJob.objects.create(job_id=f"history-{i}", kind="porep-c2", circuit_id="porep-c2/tiny",
                                state=JobState.DONE, started_at=now - timedelta(seconds=100),
                                finished_at=now - timedelta(seconds=70))

    def job(job_id: str, kind: str = "porep-c2", deadline_in: float | None = None, **fields: object) -> None:
        deadline = None if deadline_in is None else now + timedelta(seconds=deadline_in)
        made, _ = submit_job(kind=kind, job_id=job_id, inputs={}, num_partitions=1, circuit_id=f"{kind}/tiny",
                             deadline=deadline)
        ProofJob.objects.filter(pk=made.pk).update(**fields)

    job("late", deadline_in=-3, state=JobState.RUNNING, started_at=now - timedelta(seconds=20))
    job("at-risk", deadline_in=10)
    job("on-time", deadline_in=600)
    job("no-deadline")
    job("missed-done", deadline_in=-60, state=JobState.DONE, finished_at=now - timedelta(seconds=50))
    job("missed-failed", kind="winning-post", deadline_in=-60, state=JobState.FAILED,
        finished_at=now - timedelta(seconds=1))
    job("made-it", kind="winning-post", deadline_in=-60, state=JobState.DONE, finished_at=now - timedelta(seconds=61))


def test_status_pipelines_carry_each_jobs_deadline_slack_and_flags(deadlines: None, operator_api: Client) -> None:
    status = operator_api.get("/status").json()
    jsonschema.validate(status, status_schema(), format_checker=jsonschema.FormatChecker())
    pipes = {p["job_id"]: p for p in status["pipelines"]}
    assert set(pipes) == {"late", "at-risk", "on-time", "no-deadline"}
    late, risky, roomy, plain = pipes["late"], pipes["at-risk"], pipes["on-time"], pipes["no-deadline"]
    assert (late["late"], late["at_risk"]) == (True, False) and late["slack_secs"] < -2
    assert (risky["late"], risky["at_risk"]) == (False, True) and -21 < risky["slack_secs"] < -19
    assert (roomy["late"], roomy["at_risk"]) == (False, False) and 560 < roomy["slack_secs"] < 571
    deadline = ProofJob.objects.get(job_id="on-time").deadline
    assert deadline is not None and roomy["deadline"] == iso_moment(deadline)
    assert (plain["deadline"], plain["slack_secs"], plain["at_risk"], plain["late"]) == (None, None, False, False)


def test_metrics_count_missed_deadlines_by_kind_and_the_jobs_at_risk_and_late_now(deadlines: None,
                                                                                   anonymous: Client) -> None:
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    missed = {s.labels["kind"]: s.value for s in families["provingsite_deadline_missed"].samples
              if s.name == "provingsite_deadline_missed_total"}
    assert missed == {"porep-c2": 1, "winning-post": 1}
    assert families["provingsite_jobs_at_risk"].samples[0].value == 1
    assert families["provingsite_jobs_late"].samples[0].value == 1
    # A late job that finishes counts once it has, and is no longer late.
    ProofJob.objects.filter(job_id="late").update(state=JobState.DONE, finished_at=timezone.now())
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    missed = {s.labels["kind"]: s.value for s in families["provingsite_deadline_missed"].samples
              if s.name == "provingsite_deadline_missed_total"}
    assert missed == {"porep-c2": 2, "winning-post": 1}
    assert families["provingsite_jobs_late"].samples[0].value == 0


def test_metrics_declare_the_deadline_families_on_a_farm_without_deadlines(anonymous: Client) -> None:
    text = anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert "# TYPE provingsite_deadline_missed_total counter" in text
    families = _families(text)
    assert families["provingsite_jobs_at_risk"].samples[0].value == 0
    assert families["provingsite_jobs_late"].samples[0].value == 0


@pytest.fixture
def measured(farm: None) -> None:
    """gpu-a's last heartbeat measured its H200 through NVML; cpu-b has no NVML (a CPU host)."""
    now = timezone.now()
    EngineHost.objects.filter(name="gpu-a").update(figures=HostFigures(
        sampled_at=now, cpu_percent=37.5, cpu_count=64, memory_used_bytes=90 << 30, memory_total_bytes=128 << 30,
        engine_rss_bytes=20 << 30, nvml=True,
        devices=(DeviceFigures("cuda:0", 87.0, 60 << 30, 141 << 30, 412.3),)).to_json())
    EngineHost.objects.create(name="cpu-b", backend="cpu", started_at=now - timedelta(minutes=1), heartbeat_at=now,
                              figures=HostFigures(sampled_at=now, cpu_percent=99.0, cpu_count=8,
                                                  memory_used_bytes=3 << 30, memory_total_bytes=16 << 30,
                                                  engine_rss_bytes=1 << 30).to_json())


def test_status_carries_each_hosts_measured_figures_within_the_schema(measured: None, operator_api: Client) -> None:
    body = operator_api.get("/status").json()
    jsonschema.validate(body, status_schema(), format_checker=jsonschema.FormatChecker())
    hosts = {h["name"]: h["figures"] for h in body["hosts"]}
    assert hosts["gpu-a"]["cpu_percent"] == 37.5 and hosts["gpu-a"]["memory_used_bytes"] == 90 << 30
    assert hosts["gpu-a"]["devices"] == [{"device": "cuda:0", "utilisation_percent": 87.0, "memory_used_bytes": 60 << 30,
                                          "memory_total_bytes": 141 << 30, "power_watts": 412.3}]
    assert hosts["cpu-b"]["nvml"] is False and hosts["cpu-b"]["devices"] == []


def test_metrics_gauge_the_measured_figures_and_no_device_figures_without_nvml(measured: None,
                                                                                anonymous: Client) -> None:
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())

    def by_host(name: str) -> dict[str, float]:
        return {s.labels["host"]: s.value for s in families[name].samples}

    assert by_host("provingsite_host_cpu_percent") == {"gpu-a": 37.5, "cpu-b": 99.0}
    assert by_host("provingsite_host_memory_used_bytes") == {"gpu-a": 90 << 30, "cpu-b": 3 << 30}
    assert by_host("provingsite_host_memory_total_bytes") == {"gpu-a": 128 << 30, "cpu-b": 16 << 30}
    assert by_host("provingsite_engine_rss_bytes") == {"gpu-a": 20 << 30, "cpu-b": 1 << 30}
    for name, value in [("provingsite_device_utilisation_percent", 87.0), ("provingsite_device_power_watts", 412.3),
                        ("provingsite_device_memory_used_bytes", 60 << 30)]:
        assert [(s.labels, s.value) for s in families[name].samples] == [({"host": "gpu-a", "device": "cuda:0"}, value)]
    assert "sampled every heartbeat" in families["provingsite_host_cpu_percent"].documentation


def test_metrics_leave_out_the_figures_of_a_stale_host(measured: None, anonymous: Client) -> None:
    EngineHost.objects.filter(name="cpu-b").update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    families = _families(anonymous.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    assert {s.labels["host"] for s in families["provingsite_host_cpu_percent"].samples} == {"gpu-a"}
