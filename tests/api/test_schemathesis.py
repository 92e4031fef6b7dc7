"""Schemathesis over the API's whole OpenAPI document, as a client and as an operator: whatever is
sent, no answer is a server error. Run in process over WSGI, bounded to a few minutes on 2 cores."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.urls import reverse
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
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


# ---- the probe's values spliced into generated requests ---------------------------------------
# Each value once made a 5xx or let a request through that should not pass: a deadline the
# database kept and Python could not read back, a digit int() refuses, a URL urlsplit refuses,
# callbacks to internal addresses and outside the ports. Every submission operation (a JSON job,
# a custom upload, a witness upload) gets generated bodies with one of them in place of a field.
PROBED = {
    "deadline": ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00Z",
                 "2026-13-01T00:00:00Z", "2026-02-30T12:00:00Z", "2026-12-01T00:00:00+25:00", "2100-01-01T00:00:00Z"],
    "priority": ["²", "٣", "𝟙", "-0", "4", " ", "critical\x00"],
    "callback_url": ["http://[::1", "http://[::1]:99999/", "http://h.example:0/", "http://h.example:65536/",
                     "http://169.254.169.254/latest/meta-data", "http://0x7f000001/", "http://2130706433/",
                     "http://[::ffff:169.254.169.254]/", "http://localhost/", "http://10.0.0.1/", "gopher://h.example/"],
}

probed = schemathesis.openapi.from_wsgi(reverse(f"{api.urls_namespace}:openapi-json"),
                                        get_wsgi_application()).include(method="POST", path_regex="jobs")


@probed.hook
def flatmap_body(context: object, body: object) -> st.SearchStrategy[object]:
    if not isinstance(body, dict):
        return st.just(body)
    return st.sampled_from(sorted(PROBED)).flatmap(
        lambda field: st.sampled_from(PROBED[field]).map(lambda value: {**body, field: value}))


@pytest.mark.slow
@pytest.mark.django_db
@probed.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_submission_with_a_value_the_probe_found_is_a_server_error(case, scoped_token: str, uploads,
                                                                      in_test_transaction: None) -> None:  # noqa: F811
    response = case.call_and_validate(headers={"Authorization": f"Bearer {scoped_token}"}, checks=[not_a_server_error])
    body = case.body if isinstance(case.body, dict) else {}
    probed_values = [field for field, values in PROBED.items() if body.get(field) in values]
    assert response.status_code not in (200, 201) or not probed_values, f"a probed {probed_values} was accepted"
