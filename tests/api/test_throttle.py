"""Per-token request rates: a token bucket per token, and a 429 with Retry-After past it."""

from __future__ import annotations

from itertools import count

import pytest
from django.test import Client

from engine.api.throttle import Rate, TokenBuckets
from engine.ledger.tokens import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def slow_rate(settings):
    """Client tokens at 1 request/s with a burst of 2, operator tokens unlimited."""
    settings.PROVINGSITE = {**settings.PROVINGSITE, "API_RATE": 1.0, "API_BURST": 2, "API_OPERATOR_RATE": 0.0}
    return settings


NAMES = count()


def client(scope: str = "client") -> Client:
    _, raw = issue_token(f"{scope}-{next(NAMES)}", scope=scope)
    return Client(headers={"Authorization": f"Bearer {raw}"})


def test_a_bucket_allows_its_burst_then_names_the_wait_until_the_next_request() -> None:
    buckets, rate = TokenBuckets(), Rate(per_second=2.0, burst=3)
    assert [buckets.take("t", rate, now=10.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("t", rate, now=10.0) == pytest.approx(0.5)


def test_a_bucket_refills_at_its_rate_and_never_past_its_burst() -> None:
    buckets, rate = TokenBuckets(), Rate(per_second=2.0, burst=3)
    for _ in range(3):
        buckets.take("t", rate, now=0.0)
    assert buckets.take("t", rate, now=0.5) == 0.0  # one back after half a second
    assert buckets.take("t", rate, now=0.5) > 0
    assert [buckets.take("t", rate, now=100.0) for _ in range(4)][-1] > 0  # a long rest refills to 3, not 200


def test_a_rate_of_zero_is_no_limit() -> None:
    buckets = TokenBuckets()
    assert all(buckets.take("t", Rate(0.0, 1), now=0.0) == 0.0 for _ in range(1000))


def test_a_token_past_its_rate_gets_429_with_retry_after(slow_rate: object) -> None:
    api = client()
    assert [api.get("/api/v1/jobs").status_code for _ in range(2)] == [200, 200]
    response = api.get("/api/v1/jobs")
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert response.json()["error"] == "rate_limited"


def test_one_token_past_its_rate_does_not_slow_another(slow_rate: object) -> None:
    greedy, patient = client(), client()
    for _ in range(3):
        greedy.get("/api/v1/jobs")
    assert patient.get("/api/v1/jobs").status_code == 200


def test_operator_tokens_are_not_limited_by_default(slow_rate: object) -> None:
    operator = client("operator")
    assert {operator.get("/api/v1/jobs").status_code for _ in range(10)} == {200}


def test_with_shedding_off_no_token_is_limited(slow_rate) -> None:
    slow_rate.PROVINGSITE = {**slow_rate.PROVINGSITE, "LOAD_SHEDDING": False}
    api = client()
    assert {api.get("/api/v1/jobs").status_code for _ in range(5)} == {200}


def test_an_unknown_token_is_a_401_not_a_429(slow_rate: object) -> None:
    stranger = Client(headers={"Authorization": "Bearer ps_not-a-real-token"})
    assert {stranger.get("/api/v1/jobs").status_code for _ in range(4)} == {401}
