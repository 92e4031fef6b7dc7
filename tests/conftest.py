"""Shared fixtures. Services that are missing skip their tests with the reason, except in
CI, where PROVINGSITE_REQUIRE_SERVICES=1 turns the skip into a failure."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

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


# What makes a test database-facing: pytest-django's marker, or a fixture that opens the test
# database (the engines a test starts as processes are handed it through one of these too).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_reset_sequences",
                               "django_db_serialized_rollback"})


def database_facing(item: pytest.Item) -> bool:
    if item.get_closest_marker("database_agnostic") is not None:
        return False
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


FARM_TESTS = Path(__file__).resolve().parent / "farm"


def takes_the_machine(item: pytest.Item) -> bool:
    """A test that runs a farm (engines, consoles, the shared Redis restarted under it) or a
    browser against a server."""
    return item.get_closest_marker("browser") is not None or FARM_TESTS in item.path.parents


@pytest.fixture(autouse=True)
def machine_to_itself(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist (bin/test) the tests that take the machine run one at a time, each
    beside the lighter tests of the other workers but never beside another of their own: a
    file lock in the run's shared temporary folder (the workers' own folders are inside it)."""
    if not takes_the_machine(request.node) or "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "machine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With PROVINGSITE_TESTS_DATABASE_ONLY=1 (bin/test's PostgreSQL pass) only the tests that
    use the database run: the rest (arithmetic, provers, parsers, and the tests marked
    database_agnostic: a client's wasm or circom circuit through the API) ran on SQLite already
    and would run the same code again."""
    if os.environ.get("PROVINGSITE_TESTS_DATABASE_ONLY") != "1":
        return
    kept = [item for item in items if database_facing(item)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if not database_facing(item)])
        items[:] = kept
