"""Keys with an identity: the farm proves a circuit with one key, and a host with another refuses."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.keys import adopt_key
from engine.ledger.submission import Submission, submit
from engine.models import EngineHost, FarmKey, Partition, ProofJob
from engine.states import JobState, PartitionState
from tests.engine.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

POREP = "porep-c2/tiny"


def job_of(kind: str) -> ProofJob:
    """A real job of a built-in kind at scale tiny, as the demo submits them."""
    inputs, n = validate_inputs(kind, demo_inputs(kind))
    job, _ = submit(Submission(kind=kind, job_id=f"{kind}-{n}-{time.monotonic_ns()}", inputs=inputs, num_partitions=n,
                               circuit_id=f"{kind}/tiny", scale="tiny"))
    return job


def refused_by(host_name: str) -> dict[str, str]:
    return EngineHost.objects.get(name=host_name).refused_keys


def test_the_first_key_a_host_loads_becomes_the_farms_and_the_job_names_it(start_engine) -> None:
    job = job_of("porep-c2")
    assert start_engine().run_until_idle(timeout=120)
    job.refresh_from_db()
    farm = FarmKey.objects.get(circuit_id=POREP)
    assert job.state == JobState.DONE and job.vk_digest == farm.vk_digest
    assert farm.recorded_by == "test-host-0"


def test_a_host_whose_key_is_not_the_farms_refuses_the_kind_and_proves_the_rest(
        start_engine, caplog) -> None:
    adopt_key(POREP, "0" * 64, "host-with-the-real-keys")
    porep, window = job_of("porep-c2"), job_of("window-post")
    caplog.set_level(logging.ERROR, logger="engine.reserve")
    engine = start_engine()
    wait_until(lambda: POREP in refused_by("test-host-0"))
    wait_until(lambda: ProofJob.objects.get(pk=window.pk).state == JobState.DONE)
    assert "digest" in refused_by("test-host-0")[POREP] and "host-with-the-real-keys" in refused_by("test-host-0")[POREP]
    assert f"refusing to prove {POREP} on this host" in caplog.text
    # Handed back, not failed: a host with the farm's key can still prove it. The refusal is
    # recorded on the host row a moment before the partition is handed back, so wait for that too.
    wait_until(lambda: not Partition.objects.filter(job=porep).exclude(state=PartitionState.PENDING).exists())
    parts = Partition.objects.filter(job=porep)
    assert {(p.state, p.host_id) for p in parts} == {(PartitionState.PENDING, None)}
    assert ProofJob.objects.get(pk=porep.pk).state != JobState.FAILED
    handed_back = [e["reason"] for p in parts for e in p.errors]
    assert len(handed_back) == 1 and f"refuses {POREP}" in handed_back[0]  # claimed once, then never again
    from engine.console.reads import synthesis_reasons_context
    from engine.status.read_model import live_farm

    with live_farm() as farm:
        assert f"refuses {POREP}" in synthesis_reasons_context(farm)["reason"]
    engine.stop(drain_seconds=5)


def test_an_engine_with_no_keys_makes_none_unless_asked(start_engine, settings, tmp_path: Path) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "DEV_KEYS": False, "PARAMS_DIR": tmp_path}
    job_of("porep-c2")
    start_engine()
    wait_until(lambda: POREP in refused_by("test-host-0"))
    assert "run `manage.py setupkeys`" in refused_by("test-host-0")[POREP]
    assert not any(tmp_path.iterdir())  # no development key was made behind the operator's back


@pytest.mark.django_db
def test_setupkeys_records_its_keys_as_the_farms_and_says_when_they_differ(settings, tmp_path: Path) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PARAMS_DIR": tmp_path}
    call_command("setupkeys", "--kind", "porep-c2", "--scale", "tiny")
    made = FarmKey.objects.get(circuit_id=POREP)
    assert made.recorded_by == "setupkeys"
    FarmKey.objects.filter(pk=made.pk).update(vk_digest="f" * 64)
    with pytest.raises(CommandError, match="not|digest"):
        call_command("setupkeys", "--kind", "porep-c2", "--scale", "tiny")
    call_command("setupkeys", "--kind", "porep-c2", "--scale", "tiny", "--force")
    assert FarmKey.objects.get(circuit_id=POREP).vk_digest not in ("f" * 64, made.vk_digest)
