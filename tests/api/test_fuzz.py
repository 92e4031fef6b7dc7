"""Property-based fuzzing from the OpenAPI schema (schemathesis), in process over WSGI.

Whatever a client sends, the API must answer without a server error and in the shape its
schema promises; afterwards the engine must still prove a job, so nothing the fuzzer left in
the records can wedge it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# Bounded: a few dozen cases per operation keeps the whole run well under a minute on 2 cores.
EXAMPLES = 25

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def in_test_transaction() -> Iterator[None]:
    # As Django's own test client does: the handler must not close the connection that holds
    # the test's transaction at the end of each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_request_makes_the_api_fail(case, token: str, uploads, in_test_transaction: None) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
