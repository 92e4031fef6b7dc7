"""The console's own login: staff and the operator group get in, nobody else, and it is not the admin's."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from engine.api.auth import OPERATOR_GROUP
from tests.console.conftest import SNAP_ID, Farm

pytestmark = pytest.mark.django_db
PASSWORD = "pw-for-tests-only"


def log_in(username: str, password: str = PASSWORD) -> tuple[Client, str]:
    """Post the console's login form as a browser would; the client and where it landed."""
    client = Client()
    response = client.post(reverse("console-login"), {"username": username, "password": password,
                                                      "next": reverse("console")}, follow=True)
    return client, response.content.decode()


def test_anonymous_visitors_are_sent_to_the_console_login_not_the_admin_one() -> None:
    response = Client().get(reverse("console"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console-login"))
    page = Client().get(response["Location"])
    assert [t.name for t in page.templates][0] == "console/login.html"
    assert "admin" not in page.content.decode().lower().split("<main>", 1)[1]


def test_a_non_staff_operator_logs_in_and_sees_the_console(farm: Farm, operator_user: User) -> None:
    assert not operator_user.is_staff
    _, html = log_in(operator_user.get_username())
    assert SNAP_ID in html
    assert 'id="console"' in html


def test_staff_log_in_too(farm: Farm, staff_user: User) -> None:
    _, html = log_in(staff_user.get_username())
    assert SNAP_ID in html


def test_a_user_neither_staff_nor_operator_is_refused_at_the_login() -> None:
    get_user_model().objects.create_user("visitor", password=PASSWORD)
    client, html = log_in("visitor")
    assert "may not use the console" in html
    assert "_auth_user_id" not in client.session


def test_a_wrong_password_is_refused(operator_user: User) -> None:
    client, html = log_in(operator_user.get_username(), "not-the-password")
    assert "_auth_user_id" not in client.session
    assert "Please enter a correct username and password" in html


def test_logging_out_ends_the_session(farm: Farm, operator_user: User) -> None:
    client, _ = log_in(operator_user.get_username())
    response = client.post(reverse("console-logout"))
    assert response["Location"] == reverse("console-login")
    assert client.get(reverse("console")).status_code == 302


def test_the_console_page_offers_a_log_out(farm: Farm, operator_user: User) -> None:
    _, html = log_in(operator_user.get_username())
    assert re.search(rf'<form class="logout" method="post" action="{reverse("console-logout")}"', html)


def test_the_operator_group_exists_before_anyone_opens_the_console() -> None:
    assert Group.objects.filter(name=OPERATOR_GROUP).exists()


def test_ensureoperator_makes_an_operator_who_can_log_in(farm: Farm, capsys) -> None:
    call_command("ensureoperator", "--operator", "night-owl")
    said = re.search(r"password '([^']+)'", capsys.readouterr().out)
    assert said, "ensureoperator prints the new operator's password"
    password = said.group(1)
    user = get_user_model().objects.get(username="night-owl")
    assert not user.is_staff and user.groups.filter(name=OPERATOR_GROUP).exists()
    _, html = log_in("night-owl", password)
    assert SNAP_ID in html
