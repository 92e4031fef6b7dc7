"""The Grafana dashboard and the Prometheus alert rules under docs/monitoring/ stay true to
what /metrics serves: every series they query exists in a real scrape, and the files are well
formed (promtool checks the rules too where it is installed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.api.test_status_metrics import farm  # noqa: F401 - the fixture: a small live farm
from tests.conftest import require_service

pytestmark = pytest.mark.django_db
DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
SERIES = re.compile(r"\bprovingsite_[a-z_]+\b")


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def scraped_series(client: Client) -> set[str]:
    """Every series name /metrics declares, whether or not this farm has a sample of it yet."""
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    return {family.name + suffix for family in text_string_to_metric_families(text)
            for suffix in SUFFIXES.get(family.type, ("",))}


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load((DOCS / "alerts.yml").read_text())["groups"] for rule in group["rules"]]


def test_every_alert_has_a_name_a_duration_a_severity_and_a_summary() -> None:
    names = [rule["alert"] for rule in rules()]
    assert {"ProvingsiteHostStale", "ProvingsiteFailureRateHigh", "ProvingsiteQueueGrowing",
            "ProvingsiteMemoryNearBudget", "ProvingsiteDeadlineMissed", "ProvingsiteJobsAtRisk"} <= set(names)
    assert len(names) == len(set(names))
    for rule in rules():
        assert rule["expr"] and re.fullmatch(r"\d+[smh]", str(rule["for"])), rule
        assert rule["labels"]["severity"] in {"page", "ticket"}
        assert rule["annotations"]["summary"]


def test_every_series_the_alerts_query_is_served_by_metrics(farm: None, anonymous: Client) -> None:  # noqa: F811
    served = scraped_series(anonymous)
    for rule in rules():
        assert set(SERIES.findall(str(rule["expr"]))) <= served, rule["alert"]


def test_every_series_the_dashboard_queries_is_served_by_metrics(farm: None, anonymous: Client) -> None:  # noqa: F811
    served = scraped_series(anonymous)
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        for target in panel["targets"]:
            queried = set(SERIES.findall(target["expr"]))
            assert queried and queried <= served, (panel["title"], queried - served)


def test_promtool_accepts_the_rules_where_it_is_installed() -> None:
    promtool = shutil.which("promtool")
    require_service(promtool is not None, "promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    result = subprocess.run([promtool, "check", "rules", str(DOCS / "alerts.yml")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_deadline_alerts_fire_in_promtools_rule_tests_where_it_is_installed() -> None:
    """alerts_test.yml: a missed deadline pages at once, per kind, and stops five minutes
    later; jobs at risk open a ticket after a minute, not for a shorter spell."""
    tested = {t["alertname"] for case in yaml.safe_load((DOCS / "alerts_test.yml").read_text())["tests"]
              for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert {"ProvingsiteDeadlineMissed", "ProvingsiteJobsAtRisk"} <= tested
    promtool = shutil.which("promtool")
    require_service(promtool is not None, "promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    result = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], capture_output=True, text=True, cwd=DOCS)
    assert result.returncode == 0, result.stdout + result.stderr
