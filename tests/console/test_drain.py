"""Drain or resume a host from the console: a confirm page, then a CSRF-checked POST."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from engine.models import EngineHost
from engine.status.records import current_version
from tests.console.conftest import Farm, strict

pytestmark = pytest.mark.django_db

DRAIN = "/hosts/gpu-host-a/drain"
RESUME = "/hosts/gpu-host-a/resume"


def token_of(html: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match, "the confirm page carries a CSRF token"
    return match.group(1)


def test_the_hosts_panel_links_a_live_host_to_its_drain_page(staff: Client, farm: Farm) -> None:
    html = staff.get("/").content.decode()
    assert f'href="{DRAIN}">drain</a>' in html


def test_an_operator_drains_a_host_through_the_confirm_page(operator_user: User, farm: Farm) -> None:
    client = strict(operator_user)
    page = client.get(DRAIN)
    assert page.status_code == 200 and b"drain gpu-host-a" in page.content
    before = current_version()
    response = client.post(DRAIN, {"csrfmiddlewaretoken": token_of(page.content.decode())})
    assert response.status_code == 302 and response["Location"] == "/"
    host = EngineHost.objects.get(pk=farm.host.pk)
    assert host.draining and host.version > before  # a new version, so every console hears of it


def test_a_drain_without_the_csrf_token_is_refused(operator_user: User, farm: Farm) -> None:
    assert strict(operator_user).post(DRAIN).status_code == 403
    assert not EngineHost.objects.get(pk=farm.host.pk).draining


def test_a_drained_host_shows_draining_with_a_resume_link(staff: Client, farm: Farm) -> None:
    staff.post(DRAIN)
    html = staff.get("/").content.decode()
    host = html.split('data-host="gpu-host-a"', 1)[1].split("</li>", 1)[0]
    assert '<span class="flag draining">draining</span>' in host and f'href="{RESUME}">resume</a>' in host
    assert "gpu-host-a: draining" in html  # the message after the redirect


def test_resuming_clears_the_drain(staff: Client, farm: Farm) -> None:
    EngineHost.objects.filter(pk=farm.host.pk).update(draining=True)
    staff.post(RESUME)
    assert not EngineHost.objects.get(pk=farm.host.pk).draining


def test_only_viewers_may_drain(client: Client, farm: Farm) -> None:
    response = client.post(DRAIN)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not EngineHost.objects.get(pk=farm.host.pk).draining


def test_an_unknown_host_is_not_found(staff: Client, farm: Farm) -> None:
    assert staff.post("/hosts/no-such-host/drain").status_code == 404
