"""Which requests may carry how much body, decided from the request line and headers."""

from __future__ import annotations

from provingsite.bodylimit import body_limit, is_login, judge, request_path

TOKEN = "Bearer ps_anything"


def test_methods_without_a_body_may_send_none() -> None:
    assert body_limit("GET", "/events/") == 0
    assert body_limit("HEAD", "/api/v1/jobs") == 0


def test_the_upload_takes_the_upload_limit_and_everything_else_a_few_kib(settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "UPLOAD_LIMIT": "64MiB", "BODY_LIMIT": "16KiB"}
    assert body_limit("POST", "/api/v1/jobs/custom") == 64 * 2**20
    assert body_limit("POST", "/api/v1/jobs") == 16 * 2**10


def test_the_path_is_the_one_django_routes() -> None:
    assert request_path(b"/api/v1/jobs/%63ustom?x=1") == "/api/v1/jobs/custom"
    assert request_path(b"http://proving.example.net/api/v1/jobs/custom") == "/api/v1/jobs/custom"


def test_a_declared_length_over_the_limit_is_refused_whoever_sends_it() -> None:
    refusal = judge("POST", "/api/v1/jobs", 10**9, TOKEN, None)
    assert refusal is not None and refusal.status == 413


def test_a_body_needs_a_token_or_a_session_cookie(settings) -> None:
    refusal = judge("POST", "/api/v1/jobs", 100, None, "csrftoken=abc")
    assert refusal is not None and refusal.status == 401
    assert judge("POST", "/api/v1/jobs", 100, TOKEN, None) is None
    assert judge("POST", "/jobs/x/cancel", None, None, f"{settings.SESSION_COOKIE_NAME}=k") is None


def test_a_login_form_and_an_empty_body_need_no_credentials() -> None:
    assert is_login("/admin/login/") and is_login("/login") and not is_login("/api/v1/jobs")
    assert judge("POST", "/admin/login/", 300, None, None) is None
    assert judge("POST", "/api/v1/jobs/x/cancel", 0, None, None) is None
