"""The capacity reader on records written through the ledger: arrivals, service times (the
device's lock wait taken out), reservations and the host's shape, as the simulator needs them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from engine.circuits.kinds import parse_circuit_id
from engine.ledger.hosts import register_host, worker_rows
from engine.ledger.jobs import cancel_job, submit_job
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, ProofJob
from engine.states import PartitionState
from engine.status import capacity as capacity_mod
from engine.status.capacity import capacity, recorded
from engine.status.capacity_sim import HostShape

pytestmark = pytest.mark.django_db
P = PartitionState
GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture
def writer() -> StatusWriter:
    host = register_host("gpu-a", backend="cuda", memory_budget_bytes=256 * GiB, memory_total_bytes=512 * GiB,
                         synthesis_max=4, cost_per_hour=2.0)
    worker_rows(host, ["cuda:0"], 2)
    return StatusWriter(EngineHost.objects.get(pk=host.pk))


def submitted(job_id: str, partitions: int = 2, circuit: str = "porep-c2/tiny") -> ProofJob:
    kind, _, scale = circuit.partition("/")
    job, _ = submit_job(kind=kind, job_id=job_id, inputs={"n": job_id}, num_partitions=partitions,
                        circuit_id=circuit, scale=scale)
    return job


def proved(writer: StatusWriter, t0: datetime, gpu: list[tuple[float, float]]) -> None:
    """Claim the queued partitions and walk each through the ledger: 0.5 s of synthesis from
    t0, then on the GPU from gpu[i][0] to gpu[i][1] s (on worker i of cuda:0), done 0.25 s after."""
    at: Callable[[float], datetime] = lambda s: t0 + timedelta(seconds=s)  # noqa: E731
    workers = list(writer.host.workers.order_by("ordinal"))
    for i, claim in enumerate(writer.claim(len(gpu))):
        start, end = gpu[i]
        for target, fields in ((P.SYNTHESIZING, {"synth_started_at": at(0), "reserved_bytes": 3 * MiB}),
                               (P.SYNTH_DONE, {"synth_finished_at": at(0.5)}),
                               (P.GPU, {"worker": workers[i], "gpu_started_at": at(start)}),
                               (P.FINALIZING, {"gpu_finished_at": at(end)}),
                               (P.DONE, {"finished_at": at(end + 0.25)})):
            writer.apply(Transition(claim, target, fields))


def test_a_proved_job_becomes_an_arrival_and_its_partitions_the_circuits_service_times(writer: StatusWriter) -> None:
    since = timezone.now() - timedelta(minutes=1)
    job = submitted("sector-1")
    t0 = timezone.now()
    # Both workers of one device: the second took its partition at 1.2 s but held the device's
    # lock only from 2.0 s, when the first left it.
    proved(writer, t0, [(1.0, 2.0), (1.2, 3.0)])
    rec = recorded(since, timezone.now() + timedelta(minutes=1))
    (arrival,) = rec.arrivals
    assert (arrival.job, arrival.circuit, arrival.partitions, arrival.priority) == ("sector-1", "porep-c2/tiny", 2, 2)
    assert arrival.at_s == pytest.approx((job.submitted_at - since).total_seconds())
    profile = rec.profiles["porep-c2/tiny"]
    assert sorted(round(s.device_s, 6) for s in profile.services) == [1.0, 1.0]
    assert {(s.synth_s, s.finalize_s) for s in profile.services} == {(0.5, 0.25)}
    needs = parse_circuit_id("porep-c2/tiny").memory
    assert profile.memory_bytes == 3 * MiB and profile.abc_bytes == min(needs.released_bytes, 3 * MiB)
    tables = needs.table_bytes if settings.PROVINGSITE["FIXED_BASE"] else 0
    assert profile.key_bytes == needs.key_bytes + tables and profile.dispatch_s >= 0
    assert rec.host == HostShape(memory_budget=256 * GiB, synthesis=4, devices=1, workers_per_device=2,
                                 cost_per_hour=2.0)
    job.refresh_from_db()
    assert job.started_at is not None and rec.hosts == 1
    # The host started inside the range: the replayed farm opens at its first claim.
    assert rec.opens_s == pytest.approx((job.started_at - since).total_seconds())
    (measured,) = rec.measured
    assert measured.claim_wait_s is not None and measured.claim_wait_s >= 0


def test_jobs_outside_the_range_and_cancelled_ones_are_not_replayed(writer: StatusWriter) -> None:
    old = submitted("last-week")
    ProofJob.objects.filter(pk=old.pk).update(submitted_at=timezone.now() - timedelta(days=7))
    since = timezone.now() - timedelta(minutes=1)
    submitted("proved")
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    cancel_job(submitted("cancelled"))
    rec = recorded(since, timezone.now() + timedelta(minutes=1))
    assert [a.job for a in rec.arrivals] == ["proved"] and rec.jobs_in_range == 1


def test_a_circuit_never_proved_in_the_range_is_replayed_with_its_last_records(writer: StatusWriter) -> None:
    submitted("yesterday")
    proved(writer, timezone.now() - timedelta(days=1), [(1.0, 2.0), (2.0, 3.0)])
    since = timezone.now()
    submitted("today")
    rec = recorded(since, timezone.now() + timedelta(minutes=1))
    assert [a.job for a in rec.arrivals] == ["today"] and len(rec.profiles["porep-c2/tiny"].services) == 2


def test_a_job_of_a_circuit_never_recorded_is_counted_not_replayed(writer: StatusWriter) -> None:
    since = timezone.now()
    submitted("new-circuit", partitions=1, circuit="snap-update/tiny")
    rec = recorded(since, timezone.now() + timedelta(minutes=1))
    assert rec.arrivals == [] and rec.unmodelled == 1 and rec.jobs_in_range == 1


def test_a_long_range_is_capped_at_its_latest_jobs_and_says_so(writer: StatusWriter, monkeypatch) -> None:
    monkeypatch.setattr(capacity_mod, "MAX_JOBS", 2)
    since = timezone.now()
    for name in ("first", "second", "third"):
        submitted(name)
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    until = timezone.now() + timedelta(minutes=1)
    answer = capacity(since, until)
    assert answer["capped"] and (answer["jobs_in_range"], answer["replayed_jobs"]) == (3, 2)
    rec = recorded(since, until)
    second = ProofJob.objects.get(job_id="second").submitted_at
    assert [a.job for a in rec.arrivals] == ["second", "third"] and rec.arrivals[0].at_s == 0.0
    assert rec.span_s == (until - second).total_seconds()  # the cost is over the time replayed


def test_the_answer_replays_current_less_one_to_current_plus_three_hosts(writer: StatusWriter) -> None:
    since = timezone.now() - timedelta(minutes=1)
    for name in ("a", "b"):
        submitted(name)
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    proved(writer, timezone.now(), [(3.0, 4.0), (4.0, 5.0)])
    answer = capacity(since, timezone.now() + timedelta(minutes=1), budgets=[128 * GiB, 512 * GiB])
    assert answer["current"]["hosts"] == 1
    assert [(f["hosts"], f["memory_budget_bytes"]) for f in answer["farms"]] == [
        (n, b) for b in (128 * GiB, 512 * GiB) for n in (1, 2, 3, 4)]
    assert all(f["proofs"] == 2 and f["cost_per_proof"] is not None for f in answer["farms"])


def test_a_farm_that_ran_before_the_range_is_open_from_its_start(writer: StatusWriter) -> None:
    EngineHost.objects.filter(pk=writer.host.pk).update(started_at=timezone.now() - timedelta(hours=2))
    since = timezone.now() - timedelta(minutes=1)
    submitted("sector-1")
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    assert recorded(since, timezone.now() + timedelta(minutes=1)).opens_s == 0.0


def test_a_key_a_host_has_loaded_is_counted_at_its_measured_size(writer: StatusWriter) -> None:
    writer.update_host(key_cache=[{"circuit_id": "porep-c2/tiny", "bytes": 5 * MiB, "loaded_at": None}])
    since = timezone.now() - timedelta(minutes=1)
    submitted("sector-1")
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    assert recorded(since, timezone.now() + timedelta(minutes=1)).profiles["porep-c2/tiny"].key_bytes == 5 * MiB


def test_the_partition_cap_keeps_the_latest_jobs_too(writer: StatusWriter, monkeypatch) -> None:
    monkeypatch.setattr(capacity_mod, "MAX_PARTITIONS", 3)
    since = timezone.now()
    for name in ("first", "second"):
        submitted(name)  # two partitions each: both would be four
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 3.0)])
    rec = recorded(since, timezone.now() + timedelta(minutes=1))
    assert [a.job for a in rec.arrivals] == ["second"] and rec.capped


def walk_one(writer: StatusWriter, claim, synth: datetime, worker_index: int) -> None:
    """One claimed partition through the ledger: synthesis from ``synth`` (0.1 s), the GPU for 1 s, done 0.1 s later."""
    workers = list(writer.host.workers.order_by("ordinal"))
    at: Callable[[float], datetime] = lambda s: synth + timedelta(seconds=s)  # noqa: E731
    for target, fields in ((P.SYNTHESIZING, {"synth_started_at": at(0), "reserved_bytes": 3 * MiB}),
                           (P.SYNTH_DONE, {"synth_finished_at": at(0.1)}),
                           (P.GPU, {"worker": workers[worker_index], "gpu_started_at": at(0.1)}),
                           (P.FINALIZING, {"gpu_finished_at": at(1.1)}),
                           (P.DONE, {"finished_at": at(1.2)})):
        writer.apply(Transition(claim, target, fields))


@pytest.mark.parametrize(("budget", "waited_counts"), [(None, True), ("one partition", False)])
def test_a_claim_that_waited_for_memory_is_not_the_dispatchers_own_time(
        writer: StatusWriter, budget: str | None, waited_counts: bool) -> None:
    if budget is not None:  # room for the key and one partition: the second claim waits for the first
        key = parse_circuit_id("porep-c2/tiny").memory
        tables = key.table_bytes if settings.PROVINGSITE["FIXED_BASE"] else 0
        EngineHost.objects.filter(pk=writer.host.pk).update(memory_budget_bytes=key.key_bytes + tables + 4 * MiB)
    since = timezone.now() - timedelta(minutes=1)
    submitted("sector-1")
    (first,) = writer.claim(1)
    t0 = timezone.now()
    walk_one(writer, first, t0, 0)  # holds its 3 MiB from t0 to t0 + 1.2 s
    (second,) = writer.claim(1)  # claimed while the first holds its memory
    walk_one(writer, second, t0 + timedelta(seconds=4), 1)  # synthesized once it was freed: a 4 s gap
    dispatch_s = recorded(since, timezone.now() + timedelta(minutes=1)).profiles["porep-c2/tiny"].dispatch_s
    assert (dispatch_s > 1.0) is waited_counts


def test_a_trace_replay_gives_each_job_its_partitions_own_phases(writer: StatusWriter) -> None:
    since = timezone.now() - timedelta(minutes=1)
    submitted("sector-1")
    proved(writer, timezone.now(), [(1.0, 2.0), (2.0, 4.0)])
    until = timezone.now() + timedelta(minutes=1)
    (drawn,) = recorded(since, until).arrivals
    (traced,) = recorded(since, until, own_services=True).arrivals
    assert drawn.services == ()
    assert [round(s.device_s, 6) for s in traced.services] == [1.0, 2.0]
