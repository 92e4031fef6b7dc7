"""Operators' key control carried out by a real engine: a request written through the API or
``manage.py keys`` wakes the engine, which carries it out at once (not at its next heartbeat)
and records it on the request and on the host row; one the engine's own budget cannot hold is
refused there and recorded; one a host stops before carrying out ends failed."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from engine.ledger.key_requests import KeyRequestInvalid, ask
from engine.ledger.tokens import issue_token
from engine.models import EngineHost, KeyRequest
from tests.engine.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "winning-post/tiny"


def tiers_on(engine) -> dict[str, str]:
    row = EngineHost.objects.get(pk=engine.host.pk)
    return {k["circuit_id"]: k["tier"] for k in row.key_cache}


def finished(ids: list[int]) -> bool:
    return not KeyRequest.objects.filter(pk__in=ids, state=KeyRequest.State.PENDING).exists()


def test_a_preload_and_an_evict_through_the_api_move_the_key_on_the_engine(start_engine) -> None:
    engine = start_engine(synthesis=1, workers_per_device=1)
    _, raw = issue_token("ops", scope="operator")
    operator = Client(headers={"Authorization": f"Bearer {raw}"})

    response = operator.post(f"/api/v1/keys/{KEY}/preload", {"tier": "warm"}, content_type="application/json")
    assert response.status_code == 202
    ids = [r["id"] for r in response.json()["requests"]]
    wait_until(lambda: finished(ids))
    assert KeyRequest.objects.get(pk=ids[0]).state == "done" and tiers_on(engine) == {KEY: "warm"}

    response = operator.post(f"/api/v1/keys/{KEY}/preload", {"tier": "hot"}, content_type="application/json")
    wait_until(lambda: finished([r["id"] for r in response.json()["requests"]]))
    assert tiers_on(engine) == {KEY: "hot"}

    response = operator.post(f"/api/v1/keys/{KEY}/evict", {"tier": "cold"}, content_type="application/json")
    wait_until(lambda: finished([r["id"] for r in response.json()["requests"]]))
    assert tiers_on(engine) == {} and engine.memory.used == 0


def test_the_engine_refuses_a_preload_its_own_budget_cannot_hold_and_records_why(start_engine) -> None:
    engine = start_engine(synthesis=1, workers_per_device=1, budget="1MiB")
    # the records said it fitted (an older budget, say): the engine re-checks against its own
    EngineHost.objects.filter(pk=engine.host.pk).update(memory_budget_bytes=1 << 40)
    (request,) = ask(KEY, "preload", "hot", engine.host.name)
    KeyRequest.objects.filter(pk=request.pk).update(needed_bytes=2 << 20)
    wait_until(lambda: finished([request.pk]))
    request.refresh_from_db()
    assert request.state == "refused" and "of the budget is free" in request.reason
    assert tiers_on(engine) == {}


def test_manage_py_keys_preloads_lists_and_evicts_and_refuses_what_does_not_fit(start_engine) -> None:
    engine = start_engine(synthesis=1, workers_per_device=1, budget="64MiB")
    out = io.StringIO()
    call_command("keys", "preload", KEY, "--tier", "warm", "--wait", "20", stdout=out)
    assert f"asked {engine.host.name} to preload {KEY} to warm, reserving at most " in out.getvalue()
    [outcome] = [line for line in out.getvalue().splitlines() if line.startswith(f"{engine.host.name}: done: now warm")]

    out = io.StringIO()
    call_command("keys", "list", stdout=out)
    header, row = out.getvalue().splitlines()
    assert header.split()[:4] == ["HOST", "CIRCUIT", "TIER", "HOLDS"]
    assert row.split()[:3] == [engine.host.name, KEY, "warm"]
    holds = " ".join(row.split()[3:5])  # e.g. "1.5 MiB"
    assert outcome.endswith(f", holding {holds}")  # one figure under one name

    call_command("keys", "evict", KEY, "--tier", "cold", "--wait", "20", stdout=io.StringIO())
    assert tiers_on(engine) == {}

    EngineHost.objects.filter(pk=engine.host.pk).update(memory_budget_bytes=1024)
    with pytest.raises(CommandError, match=r"refused: .* \(1024 bytes\) of its memory budget free; the key needs"):
        call_command("keys", "preload", KEY, stdout=io.StringIO())


def test_a_request_is_carried_out_when_it_is_asked_not_at_the_next_heartbeat(start_engine, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "HEARTBEAT_SECONDS": 30.0}
    engine = start_engine(synthesis=1, workers_per_device=1)
    (request,) = ask(KEY, "preload", "warm", engine.host.name, requested_by="test")
    # Well inside one heartbeat: only the wake the request's commit sends can have done it.
    wait_until(lambda: finished([request.pk]), timeout=15)
    request.refresh_from_db()
    assert request.state == "done" and tiers_on(engine) == {KEY: "warm"}


def test_a_host_that_stops_fails_the_requests_it_did_not_carry_out_and_is_asked_nothing_more(engine_params) -> None:
    from engine.pipeline.host import Engine, EngineConfig

    # Prepared, not started: no key-control thread carries the request out before the stop.
    engine = Engine(EngineConfig.from_settings(devices="cpu", scale="tiny", budget="64MiB",
                                               host_name="stopping-host")).prepare()
    (request,) = ask(KEY, "preload", "warm", "stopping-host")
    engine.stop(drain_seconds=1)
    request.refresh_from_db()
    assert request.state == "failed" and request.reason == "host stopped before carrying it out"
    assert request.finished_at is not None and tiers_on(engine) == {}
    with pytest.raises(KeyRequestInvalid, match="no running engine host is named 'stopping-host'"):
        ask(KEY, "evict", "cold", "stopping-host")
    assert KeyRequest.objects.count() == 1
