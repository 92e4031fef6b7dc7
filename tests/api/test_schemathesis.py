"""Schemathesis over the API's whole OpenAPI document, as a client and as an operator: whatever is
sent, no answer is a server error. Run in process over WSGI, bounded to a few minutes on 2 cores."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.urls import reverse
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from engine.api import api
from engine.env import env_int
from engine.ledger.tokens import issue_token
from engine.models import TokenScope
from tests.api.test_fuzz import in_test_transaction  # noqa: F401 - a fixture, used by name

# Fuzzed cases per operation and scope, besides schemathesis's examples and boundary (coverage)
# cases: 8 operations × 2 scopes in about a minute here. Raise it for a deeper run by hand.
EXAMPLES = env_int("PROVINGSITE_FUZZ_EXAMPLES", 40, minimum=1)

schema = schemathesis.openapi.from_wsgi(reverse(f"{api.urls_namespace}:openapi-json"), get_wsgi_application())


@pytest.fixture(params=[TokenScope.CLIENT, TokenScope.OPERATOR])
def scoped_token(request, db: None) -> str:
    _, raw = issue_token(f"schemathesis-{request.param}", scope=request.param)
    return raw


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_request_to_any_operation_is_a_server_error(case, scoped_token: str, uploads,
                                                       in_test_transaction: None) -> None:  # noqa: F811
    case.call_and_validate(headers={"Authorization": f"Bearer {scoped_token}"}, checks=[not_a_server_error])
