"""GET /api/v1/capacity: the range's arrivals replayed on other farms, for operator tokens, with
a 4xx naming the field for a bad host count, budget or range."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from tests.api.test_stats import a_host_that_proved

pytestmark = pytest.mark.django_db
GiB = 1 << 30


@pytest.fixture
def history() -> None:
    """Two proved porep-c2 jobs of two partitions on one host of one worker, in the last hour."""
    a_host_that_proved("one", "two")


def test_an_operator_gets_the_current_farm_and_the_replays_beside_it(operator_api: Client, history: None) -> None:
    body = operator_api.get("/api/v1/capacity").json()
    assert body["current"]["hosts"] == 1 and body["current"]["memory_budget_bytes"] == 64 * GiB
    assert (body["replayed_jobs"], body["capped"]) == (2, False)
    assert [f["hosts"] for f in body["farms"]] == [1, 2, 3, 4]
    farm = body["farms"][0]
    assert set(farm) >= {"claim_wait", "done_wait", "missed_deadlines", "cost_per_proof", "proofs_per_hour"}
    assert farm["proofs"] == 2 and farm["done_wait"]["p50_s"] > 0
    assert body["measured"]["claim_wait"]["p50_s"] == 0.0  # started_at: the first claim


def test_chosen_host_counts_and_budgets_make_the_table(operator_api: Client, history: None) -> None:
    query = urlencode({"hosts": "4,2", "budget": "256GiB,128GiB"})
    body = operator_api.get(f"/api/v1/capacity?{query}").json()
    assert [(f["hosts"], f["memory_budget_bytes"] // GiB) for f in body["farms"]] == [
        (2, 128), (4, 128), (2, 256), (4, 256)]


@pytest.mark.parametrize(("query", "field"), [
    ({"hosts": "0"}, "hosts"), ({"hosts": "65"}, "hosts"), ({"hosts": "two"}, "hosts"), ({"hosts": "1,,2"}, "hosts"),
    ({"hosts": ",".join(str(n) for n in range(1, 10))}, "hosts"),
    ({"budget": "0"}, "budget"), ({"budget": "-1GiB"}, "budget"), ({"budget": "lots"}, "budget"),
    ({"budget": "1GiB,2GiB,3GiB,4GiB,5GiB"}, "budget"),
    ({"hosts": "1,2,3,4,5,6,7", "budget": "1GiB,2GiB"}, "hosts"), ({"budget": "1GiB,2GiB,3GiB"}, "hosts"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
    ({"since": "yesterday"}, "since"), ({"times": "sometimes"}, "times"),
])
def test_a_bad_field_is_refused_naming_it(operator_api: Client, query: dict[str, str], field: str) -> None:
    response = operator_api.get(f"/api/v1/capacity?{urlencode(query)}")
    assert 400 <= response.status_code < 500 and response.json()["field"] == field


def test_the_farms_capacity_is_for_operator_tokens(api: Client, anonymous: Client) -> None:
    response = api.get("/api/v1/capacity")
    assert response.status_code == 403 and response.json()["field"] == "Authorization"
    assert anonymous.get("/api/v1/capacity").status_code == 401


def test_a_range_with_nothing_recorded_replays_nothing(operator_api: Client) -> None:
    until = timezone.now()
    body = operator_api.get(f"/api/v1/capacity?{urlencode({'until': until.isoformat()})}").json()
    assert body["farms"] == [] and body["current"] is None and body["replayed_jobs"] == 0


def test_the_jobs_own_recorded_times_may_be_replayed(operator_api: Client, history: None) -> None:
    body = operator_api.get("/api/v1/capacity?times=own&hosts=1").json()
    assert body["times"] == "own" and body["own_times_jobs"] == 2
    (farm,) = body["farms"]
    assert farm["proofs"] == 2
