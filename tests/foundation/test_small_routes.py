"""The small routes an operator's browser and tools expect."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_favicon_is_served_for_browsers_that_ask_for_favicon_ico() -> None:
    from django.contrib.staticfiles import finders

    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/console/favicon.svg")
    assert finders.find("console/favicon.svg")


def test_the_api_root_leads_to_its_documentation() -> None:
    response = Client().get("/api/v1/")
    assert response.status_code == 302 and response["Location"] == "/api/v1/docs"
