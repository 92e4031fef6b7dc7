"""Shared fixtures. Services that are missing skip their tests with the reason, except in
CI, where PROVINGSITE_REQUIRE_SERVICES=1 turns the skip into a failure."""

from __future__ import annotations

import os

import pytest


def require_service(available: bool, reason: str) -> None:
    """Skip (or, where services are required, fail) a test whose service is missing."""
    if available:
        return
    if os.environ.get("PROVINGSITE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)
