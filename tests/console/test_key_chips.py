"""The console's key chips show each key's tier and carry its actions: buttons that post, after
a confirmation, the same request as the API (engine.ledger.key_requests), with the page's CSRF
token; a preload the host's budget cannot hold is refused naming the free bytes."""

from __future__ import annotations

import html as htmllib
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from engine.models import EngineHost, FarmKey, KeyRequest, ProofJob
from engine.states import ProofKind
from engine.status.host_report import KeyReport
from tests.console.conftest import Farm, bump_version, strict

pytestmark = pytest.mark.django_db
ACTION = "/keys/action"


def page_token(html: str) -> str:
    match = re.search(r"hx-headers='([^']+)'", html)
    assert match, "the console sends its CSRF token with its htmx requests"
    return json.loads(htmllib.unescape(match.group(1)))["X-CSRFToken"]


def chip(html: str, circuit: str) -> str:
    """The markup of the chip of ``circuit``: up to the next chip or the end of the list."""
    return re.split(r'<span class="chip |</div>', html.split(f'data-circuit="{circuit}"', 1)[1], maxsplit=1)[0]


def test_each_chip_shows_its_tier_and_the_confirmed_actions_to_the_other_tiers(staff: Client, farm: Farm) -> None:
    EngineHost.objects.filter(pk=farm.host.pk).update(key_cache=[
        KeyReport("snap-update/tiny", 4 * 2**30).to_json(),
        KeyReport("porep-c2/tiny", 2**20, tier="warm", mapped_bytes=2**30).to_json()])
    bump_version()
    html = staff.get("/").content.decode()
    hot, warm = chip(html, "snap-update/tiny"), chip(html, "porep-c2/tiny")
    assert 'data-tier="hot"' in hot and 'data-tier="warm"' in warm
    assert 'data-action="evict" data-to="warm"' in hot and 'hx-confirm="evict snap-update/tiny to warm on gpu-host-a?"' in hot
    assert 'data-action="preload" data-to="hot"' in warm and 'data-to="warm"' not in warm


def test_an_operator_evicts_a_key_from_its_chip(operator_user: User, farm: Farm) -> None:
    client = strict(operator_user)
    token = page_token(client.get("/").content.decode())
    response = client.post(ACTION, {"circuit": "porep-c2/tiny", "host": "gpu-host-a", "action": "evict",
                                    "tier": "cold"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 202 and b"asked gpu-host-a to evict porep-c2/tiny to cold" in response.content
    assert KeyRequest.objects.get().state == "pending"


def test_a_preload_from_a_chip_that_does_not_fit_is_refused_naming_the_free_bytes(operator_user: User,
                                                                                    farm: Farm) -> None:
    EngineHost.objects.filter(pk=farm.host.pk).update(memory_budget_bytes=41 * 2**30)  # 5 GiB keys, 36 GiB claimed
    client = strict(operator_user)
    token = page_token(client.get("/").content.decode())
    response = client.post(ACTION, {"circuit": "winning-post/tiny", "host": "gpu-host-a", "action": "preload",
                                    "tier": "hot"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 409
    assert b"gpu-host-a has 0 B (0 bytes) of its memory budget free; the key needs" in response.content
    assert not KeyRequest.objects.exists()


def test_a_chip_action_without_the_token_or_by_a_non_operator_is_refused(operator_user: User, farm: Farm) -> None:
    form = {"circuit": "porep-c2/tiny", "host": "gpu-host-a", "action": "evict", "tier": "cold"}
    assert strict(operator_user).post(ACTION, form).status_code == 403
    someone = Client()
    someone.force_login(get_user_model().objects.create_user("visitor", password="pw-for-tests-only"))
    assert someone.post(ACTION, form).status_code == 403
    assert not KeyRequest.objects.exists()


def keys_panel(html: str) -> str:
    return html.split('id="frag-keys"', 1)[1].split("</section>", 1)[0]


@pytest.fixture
def known_keys(farm: Farm) -> None:
    """Keys the host holds cold: one the farm recorded, one an active job needs; beside them a
    refused key, a client's uploaded zkey and a stopped host, none of which a chip offers."""
    FarmKey.objects.create(circuit_id="winning-post/tiny", vk_digest="a" * 64, recorded_by="setupkeys")
    FarmKey.objects.create(circuit_id="custom/0123456789abcdef", vk_digest="b" * 64, recorded_by="gpu-host-a")
    FarmKey.objects.create(circuit_id="snap-update/tiny", vk_digest="c" * 64, recorded_by="gpu-host-a")
    FarmKey.objects.create(circuit_id="porep-c2/large", vk_digest="d" * 64, recorded_by="gpu-host-b")
    ProofJob.objects.create(job_id="window-post-cold-1", kind=ProofKind.WINDOW_POST, circuit_id="window-post/tiny",
                            scale="tiny", num_partitions=2)
    EngineHost.objects.filter(pk=farm.host.pk).update(refused_keys={"porep-c2/large": "not the farm's key"})
    EngineHost.objects.create(name="gpu-host-old", stopped_at=timezone.now())
    bump_version()


def test_each_key_a_host_could_preload_but_holds_cold_has_a_chip_with_the_preload_actions(
        staff: Client, farm: Farm, known_keys: None) -> None:
    panel = keys_panel(staff.get("/").content.decode())
    for circuit in ("winning-post/tiny", "window-post/tiny"):
        cold = chip(panel, circuit)
        assert f'data-host="gpu-host-a" data-circuit="{circuit}"' in panel
        assert 'data-state="cold"' in cold and 'data-tier="cold"' in cold
        assert 'data-action="preload" data-to="hot"' in cold and 'data-action="preload" data-to="warm"' in cold
        assert f'hx-confirm="preload {circuit} to warm on gpu-host-a?"' in cold and "evict" not in cold
    # a key it holds is shown once, at its tier; what it refuses, an uploaded zkey and a stopped
    # host are not offered
    assert panel.count('data-circuit="snap-update/tiny"') == 1 and 'data-tier="hot"' in chip(panel, "snap-update/tiny")
    assert "porep-c2/large" not in panel and "custom/" not in panel and "gpu-host-old" not in panel


def test_an_operator_preloads_a_cold_key_from_its_chip(operator_user: User, farm: Farm, known_keys: None) -> None:
    client = strict(operator_user)
    token = page_token(client.get("/").content.decode())
    response = client.post(ACTION, {"circuit": "winning-post/tiny", "host": "gpu-host-a", "action": "preload",
                                    "tier": "warm"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 202 and b"asked gpu-host-a to preload winning-post/tiny to warm" in response.content
    request = KeyRequest.objects.get()
    assert (request.circuit_id, request.action, request.tier, request.state) == ("winning-post/tiny", "preload",
                                                                                "warm", "pending")
    assert request.requested_by == "console night-shift"

    # once the engine records it warm, the chip is the warm key's, not a cold one beside it
    EngineHost.objects.filter(pk=farm.host.pk).update(key_cache=[
        *EngineHost.objects.get(pk=farm.host.pk).key_cache,
        KeyReport("winning-post/tiny", 2**20, tier="warm", mapped_bytes=2**24).to_json()])
    bump_version()
    panel = keys_panel(client.get("/").content.decode())
    assert panel.count('data-circuit="winning-post/tiny"') == 1
    assert 'data-tier="warm"' in chip(panel, "winning-post/tiny")
