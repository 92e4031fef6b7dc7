"""Settings come from the environment; a bad value stops start-up and names the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import env
from engine.env import SettingError, parse_size

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "expected"), [
    ("1", True), ("true", True), ("Yes", True), ("on", True),
    ("0", False), ("false", False), ("NO", False), ("off", False),
])
def test_booleans_accept_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, text: str, expected: bool) -> None:
    monkeypatch.setenv("X_FLAG", text)
    assert env.env_bool("X_FLAG", not expected) is expected


def test_an_unset_variable_gives_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_UNSET", raising=False)
    assert env.env_int("X_UNSET", 7) == 7
    assert env.env_bool("X_UNSET", True) is True
    assert env.env_list("X_UNSET", ["a"]) == ["a"]


def test_a_bad_boolean_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(SettingError, match="X_FLAG"):
        env.env_bool("X_FLAG", False)


def test_integers_are_checked_against_their_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(SettingError, match="X_N.*>= 1"):
        env.env_int("X_N", 2, minimum=1)
    monkeypatch.setenv("X_N", "twelve")
    with pytest.raises(SettingError, match="an integer"):
        env.env_int("X_N", 2)


@pytest.mark.parametrize(("text", "expected"), [
    ("64GiB", 64 * 2**30), ("512MiB", 512 * 2**20), ("1.5GB", 1_500_000_000), ("1000", 1000), ("2 kib", 2048),
])
def test_sizes_parse_binary_and_decimal_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_a_memory_budget_is_auto_or_a_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BUDGET", "AUTO")
    assert env.env_size("X_BUDGET", "1GiB") == "auto"
    monkeypatch.setenv("X_BUDGET", "lots")
    with pytest.raises(SettingError, match="X_BUDGET"):
        env.env_size("X_BUDGET", "1GiB")


def test_choices_are_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_SCALE", "huge")
    with pytest.raises(SettingError, match="tiny, small"):
        env.env_choice("X_SCALE", "tiny", ("tiny", "small"))


def test_the_secret_key_is_generated_once_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_SECRET", raising=False)
    store = tmp_path / "secret_key"
    first = env.env_secret_key("X_SECRET", store)
    assert len(first) >= 50
    assert env.env_secret_key("X_SECRET", store) == first
    assert oct(store.stat().st_mode & 0o777) == "0o600"


def _manage(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}} | environ
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=merged,
                          capture_output=True, text=True, timeout=120)


def test_start_up_fails_naming_a_bad_engine_knob(tmp_path: Path) -> None:
    result = _manage("check", PROVINGSITE_DATA_DIR=str(tmp_path), PROVINGSITE_SYNTHESIS_CONCURRENCY="many")
    assert result.returncode != 0
    assert "PROVINGSITE_SYNTHESIS_CONCURRENCY" in result.stderr


def test_start_up_fails_naming_a_bad_database_url(tmp_path: Path) -> None:
    result = _manage("check", PROVINGSITE_DATA_DIR=str(tmp_path), DATABASE_URL="nosuchdb://x")
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_production_settings_pass_the_deployment_checklist(tmp_path: Path) -> None:
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING",
        PROVINGSITE_DATA_DIR=str(tmp_path), DEBUG="0", PROVINGSITE_HTTPS="1",
        SECRET_KEY="a-production-secret-" + "x" * 60, ALLOWED_HOSTS="proving.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("value", ["winning-post=1e12", "winning-post=nan", "winning-post=inf", "porep-c2=-5"])
def test_a_default_deadline_offset_past_a_year_or_not_a_number_stops_start_up(monkeypatch: pytest.MonkeyPatch,
                                                                              value: str) -> None:
    monkeypatch.setenv("X_DEADLINES", value)
    with pytest.raises(SettingError, match="X_DEADLINES"):
        env.env_seconds_by_name("X_DEADLINES", {}, ("winning-post", "porep-c2"), maximum=366 * 86400)


def test_the_callback_allow_list_takes_addresses_networks_and_host_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_ALLOW", "10.0.0.0/8, 192.168.1.7 ,Hooks.Corp.Example.,fd00::/8")
    assert env.env_hosts_and_networks("X_ALLOW", []) == ["10.0.0.0/8", "192.168.1.7", "hooks.corp.example", "fd00::/8"]
    for bad in ("http://hooks.example", "10.0.0.0/33", "hooks example", "a/b"):
        monkeypatch.setenv("X_ALLOW", bad)
        with pytest.raises(SettingError, match="X_ALLOW"):
            env.env_hosts_and_networks("X_ALLOW", [])
