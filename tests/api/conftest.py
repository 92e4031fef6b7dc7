"""API fixtures: a live token and a client that sends it."""

from __future__ import annotations

import pytest
from django.test import Client

from engine.ledger.tokens import issue_token

SEED = "11" * 32
RANDOMNESS = "2a" * 32


def inputs(**extra: object) -> dict[str, object]:
    return {"sector_seed": SEED, "randomness": RANDOMNESS, **extra}


@pytest.fixture(autouse=True)
def unthrottled(settings):
    """No per-token request rate: tests (and the fuzzers) send far faster than any client.
    tests/api/test_throttle.py sets the rate it tests over this."""
    settings.PROVINGSITE = {**settings.PROVINGSITE, "API_RATE": 0.0, "API_OPERATOR_RATE": 0.0}
    return settings


@pytest.fixture
def token(db: None) -> str:
    _, raw = issue_token("curio-test")
    return raw


@pytest.fixture
def api(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def operator_api(db: None) -> Client:
    """A client holding an operator token: every job, and the farm's /status."""
    _, raw = issue_token("farm-dashboard", scope="operator")
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def anonymous(db: None) -> Client:
    return Client()


@pytest.fixture
def uploads(tmp_path, settings):
    """A private DATA_DIR, so uploads and proofs land in the test's own folder."""
    settings.DATA_DIR = tmp_path
    return tmp_path
