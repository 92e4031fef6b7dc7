"""Bad input is a 400 naming the field, on every path that takes it: the values a probe once
turned into server errors (a priority of "²", a callback of ``http://[::1``, a deadline in the
year 1 once its circuit had history, a month 13 in a multipart form), callbacks to internal
addresses or outside the ports, and a token's priority limit that the kind's default once lifted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from engine.ledger.jobs import submit_job
from engine.ledger.tokens import issue_token
from engine.models import ProofJob
from engine.states import JobState, Priority
from tests.api.conftest import inputs
from tests.api.test_custom import wtns_bytes, zkey_bytes

pytestmark = pytest.mark.django_db


def post(api: Client, **fields: Any) -> Any:
    body = {"kind": "porep-c2", "job_id": "bad-input", "inputs": inputs(), **fields}
    return api.post("/api/v1/jobs", body, content_type="application/json")


def upload(api: Client, **fields: str) -> Any:
    """POST /jobs/custom with real files and ``fields`` beside them."""
    return api.post("/api/v1/jobs/custom", {"job_id": "bad-upload", "zkey": SimpleUploadedFile("c.zkey", zkey_bytes("bn128")),
                                            "wtns": SimpleUploadedFile("c.wtns", wtns_bytes("bn128")), **fields})


def refused(response: Any, field: str) -> bool:
    return response.status_code == 400 and response.json()["field"] == field


@pytest.mark.parametrize("priority", ["²", "٣", "³", "-1", "4", "03", " 1 2", "critical!", 4, -1, True])
def test_a_priority_is_a_name_or_an_ascii_digit_from_0_to_3(api: Client, uploads: Path, priority: Any) -> None:
    assert refused(post(api, priority=priority), "priority")
    if isinstance(priority, str):
        assert refused(upload(api, priority=priority), "priority")


@pytest.mark.parametrize("priority, level", [("0", Priority.CRITICAL), (" High ", Priority.HIGH), (3, Priority.LOW)])
def test_a_priority_by_name_or_number_is_taken(operator_api: Client, priority: Any, level: int) -> None:
    assert post(operator_api, priority=priority).status_code == 201
    assert ProofJob.objects.get().priority == level


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999/", "http://h.example:0/", "http://h.example:65536/",
                                 "http://h.example:-1/", "http://h.example:port/", "https://h.example:1e3/",
                                 "http://exa mple.com/", "http://example.com/\r\nX: y", "ftp://example.com/",
                                 "http:///no-host", "http://" + "a" * 64 + ".example/"])
def test_a_callback_url_that_is_not_a_reachable_http_url_is_refused_naming_it(api: Client, uploads: Path,
                                                                             url: str) -> None:
    assert refused(post(api, callback_url=url), "callback_url")
    assert refused(upload(api, callback_url=url), "callback_url")


@pytest.mark.parametrize("url", ["http://example.com:1/", "https://example.com:65535/hook?x=1",
                                 "https://[2606:4700:4700::1111]/", "http://93.184.215.14/"])
def test_a_callback_to_a_public_host_and_a_port_in_range_is_taken(api: Client, url: str) -> None:
    assert post(api, callback_url=url).status_code == 201
    assert ProofJob.objects.get().callback_url == url


INTERNAL = ["http://169.254.169.254/latest/meta-data", "http://10.0.0.1/", "http://192.168.0.1/", "http://172.16.5.4/",
            "http://[::ffff:169.254.169.254]/", "http://0x7f000001/", "http://2130706433/", "http://127.1/",
            "http://0177.0.0.1/", "http://localhost:8000/", "http://LOCALHOST./", "http://api.localhost/",
            "http://printer.local/", "http://metadata/", "http://[::1]/", "http://[fe80::1%25eth0]/",
            "http://100.64.0.1/", "http://0.0.0.0/", "http://[64:ff9b::a9fe:a9fe]/", "http://224.0.0.1/"]


@pytest.mark.parametrize("url", INTERNAL)
def test_a_callback_to_an_internal_address_is_refused_naming_it(api: Client, url: str) -> None:
    response = post(api, callback_url=url)
    assert refused(response, "callback_url") and "PROVINGSITE_CALLBACK_ALLOW" in response.json()["detail"]


def test_an_operator_lets_its_own_receivers_through_by_network_or_by_name(api: Client, settings: Any) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "CALLBACK_ALLOW": ["10.0.0.0/8", "hooks.internal"]}
    assert post(api, job_id="by-net", callback_url="http://10.1.2.3:9000/done").status_code == 201
    assert post(api, job_id="by-name", callback_url="https://hooks.internal/done").status_code == 201
    assert refused(post(api, job_id="not-allowed", callback_url="http://192.168.0.1/"), "callback_url")


def test_a_token_default_callback_is_held_to_the_same_rules(api: Client) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="not a public address"):
        call_command("createtoken", "internal-hook", "--callback-url", "http://169.254.169.254/")


def test_a_deadline_in_the_year_1_is_refused_once_its_circuit_has_history(api: Client) -> None:
    now = timezone.now()
    done, _ = submit_job(kind="porep-c2", job_id="history", inputs={}, num_partitions=1, circuit_id="porep-c2/tiny",
                         scale="tiny")
    ProofJob.objects.filter(pk=done.pk).update(state=JobState.DONE, started_at=now - timedelta(seconds=30),
                                               finished_at=now)
    for deadline in ("0001-01-01T00:00:00Z", "0001-01-01T00:00:10+00:00"):
        assert refused(post(api, deadline=deadline), "deadline")


@pytest.mark.parametrize("deadline", ["2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-12-01T25:00:00Z",
                                      "2026-12-01T00:00:00+25:00", "tomorrow", "9999-12-31T23:59:59-12:00"])
def test_a_deadline_in_a_multipart_form_that_names_no_moment_in_the_window_is_refused(api: Client, uploads: Path,
                                                                                     deadline: str) -> None:
    assert refused(upload(api, deadline=deadline), "deadline")
    assert refused(post(api, deadline=deadline), "deadline")


def test_the_wtns_path_checks_its_form_fields_the_same_way(api: Client, uploads: Path) -> None:
    from engine.models import Circuit

    Circuit.objects.create(id="ab" * 32, name="c", curve="bn128", n_public=1, n_vars=4, domain_size=8,
                           zkey_path=str(uploads / "c.zkey"), zkey_bytes=1, owner=None)
    url = f"/api/v1/circuits/{'ab' * 32}/jobs"
    wtns = SimpleUploadedFile("c.wtns", wtns_bytes("bn128"))
    cases = {"priority": "²", "deadline": "2026-13-01T00:00:00Z", "callback_url": "http://[::1"}
    operator = Client(headers={"Authorization": f"Bearer {issue_token('ops-wtns', scope='operator')[1]}"})
    for field, value in cases.items():
        assert refused(operator.post(url, {"job_id": "w", "wtns": wtns, field: value}), field), field


def test_a_token_capped_at_normal_gets_normal_for_a_kind_whose_default_is_critical(db: None) -> None:
    _, raw = issue_token("capped", max_priority=Priority.NORMAL)
    capped = Client(headers={"Authorization": f"Bearer {raw}"})
    response = capped.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "capped-wp", "inputs": inputs()},
                           content_type="application/json")
    assert response.status_code == 201 and response.json()["priority"] == "normal"
    again = capped.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "capped-wp", "inputs": inputs()},
                        content_type="application/json")
    assert again.status_code == 200  # the same request again is the same job
    asked = capped.post("/api/v1/jobs", {"kind": "winning-post", "job_id": "asked", "priority": "critical",
                                         "inputs": inputs()}, content_type="application/json")
    assert asked.status_code == 403 and asked.json()["field"] == "priority"


def test_a_token_allowed_critical_still_gets_the_kinds_default(db: None) -> None:
    _, raw = issue_token("curio", max_priority=Priority.CRITICAL)
    response = Client(headers={"Authorization": f"Bearer {raw}"}).post("/api/v1/jobs", {"kind": "winning-post", "job_id": "wp", "inputs": inputs()},
                        content_type="application/json")
    assert response.status_code == 201 and response.json()["priority"] == "critical"
