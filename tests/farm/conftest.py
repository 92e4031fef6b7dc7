"""Fixtures of the farm tests: services checked, keys made once, a fresh farm per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_service
from tests.farm.harness import Farm, FarmTemplate, ensure_params, postgres_available, redis_available

# The Redis db number the farm tests own (FLUSHDB'd before and after each test). Note that
# Redis pub/sub is not scoped by db number: the channel layer's hints are shared with anyone
# else on this Redis, which is harmless since hints are only ever re-read against the records.
REDIS_DB = int(os.environ.get("PROVINGSITE_FARM_REDIS_DB", "12"))


@pytest.fixture(scope="session")
def farm_services() -> None:
    for available, reason in (postgres_available(), redis_available()):
        require_service(available, reason)


@pytest.fixture(scope="session")
def farm_template(farm_services: None) -> Iterator[FarmTemplate]:
    ensure_params()
    template = FarmTemplate().create()
    yield template
    template.destroy()


@pytest.fixture
def farm(farm_template: FarmTemplate, tmp_path: Path) -> Iterator[Farm]:
    farm = Farm.create(farm_template, tmp_path / "farm", REDIS_DB)
    yield farm
    farm.destroy()
