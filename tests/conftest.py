"""Shared fixtures. Services that are missing skip their tests with the reason, except in
CI, where PROVINGSITE_REQUIRE_SERVICES=1 turns the skip into a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# The suite asks for development keys, as an operator would with PROVINGSITE_DEV_KEYS=1: each
# test's params directory gets its keys on first use. Engines the tests start as processes read
# the variable; this process's settings were read before this file, so the fixture below sets them.
os.environ.setdefault("PROVINGSITE_DEV_KEYS", "1")
# The engines the suite starts do not reserve their own processes at rest (~330 MiB): the
# tests' budgets are the reservations' arithmetic in miniature (a 64 MiB budget, one that fits
# a key and not a partition), which a measured, machine-dependent rest would swamp. The tests
# that check the rest's reservation turn it on (tests/engine/test_process_budget.py).
os.environ.setdefault("PROVINGSITE_CHARGE_PROCESSES", "0")


@pytest.fixture(autouse=True, scope="session")
def development_keys() -> Iterator[None]:
    from django.conf import settings

    settings.PROVINGSITE["DEV_KEYS"] = os.environ["PROVINGSITE_DEV_KEYS"] == "1"
    settings.PROVINGSITE["CHARGE_PROCESSES"] = os.environ["PROVINGSITE_CHARGE_PROCESSES"] == "1"
    yield


def require_service(available: bool, reason: str) -> None:
    """Skip (or, where services are required, fail) a test whose service is missing."""
    if available:
        return
    if os.environ.get("PROVINGSITE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)
