"""The capacity page: operators see the replayed farms, one fragment per table, and a form."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.api.test_stats import a_host_that_proved

pytestmark = pytest.mark.django_db


@pytest.fixture
def history() -> None:
    a_host_that_proved("one")


def test_the_page_shows_each_fragment_under_its_own_id_and_is_linked_from_the_header(
        staff: Client, history: None) -> None:
    html = staff.get("/capacity/").content.decode()
    for dom_id in ("capacity-form", "capacity-measured", "capacity-farms", "capacity-circuits"):
        assert f'id="{dom_id}"' in html
    assert 'href="/capacity/"' in html
    assert html.count('<tr class="') >= 4 and 'data-hosts="1"' in html and "(now, modelled)" in html
    assert "porep-c2" in html and "{%" not in html


def test_the_replayed_farms_figures_are_named_as_modelled_never_as_the_measured_ones(
        staff: Client, history: None) -> None:
    import re

    html = staff.get("/capacity/").content.decode()
    farms = html[html.index('id="capacity-farms"'):html.index('id="capacity-circuits"')]
    measured = html[html.index('id="capacity-measured"'):html.index('id="capacity-farms"')]
    assert set(re.findall(r'data-figure="([^"]+)"', farms)) == {"modelled job queue", "modelled total"}
    assert set(re.findall(r'data-figure="([^"]+)"', measured)) == {"job queue", "total"}
    legend = html[html.index('id="figures-legend"'):]
    assert 'data-figure="modelled job queue"' in legend and 'data-figure="job queue"' in legend


def test_the_form_asks_for_other_hosts_and_budgets(staff: Client, history: None) -> None:
    html = staff.get("/capacity/?hosts=3,5&budget=256GiB&window=week").content.decode()
    assert 'data-hosts="3"' in html and 'data-hosts="5"' in html and 'data-hosts="1"' not in html
    assert "256.0 GiB" in html


def test_a_bad_field_is_named_on_the_page(staff: Client) -> None:
    html = staff.get("/capacity/?hosts=99&budget=lots").content.decode()
    assert 'data-field="hosts"' in html and 'data-field="budget"' in html


def test_an_operator_sees_the_page(operator_user) -> None:
    client = Client()
    client.force_login(operator_user)
    assert client.get("/capacity/").status_code == 200


def test_anonymous_users_are_sent_to_log_in_and_others_refused() -> None:
    response = Client().get("/capacity/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    outsider = get_user_model().objects.create_user("visitor", password="pw-for-tests-only")
    client = Client()
    client.force_login(outsider)
    assert client.get("/capacity/").status_code == 403
