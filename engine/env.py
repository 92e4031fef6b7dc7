"""Typed readers for settings that come from the environment.

Every reader fails loudly with the variable's name, so a typo in a deployment is
caught at start-up rather than as odd behaviour hours later.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from pathlib import Path


class ConfigError(ValueError):
    """The operator's configuration cannot work (a setting, a device): said in one line, no traceback."""


class SettingError(ConfigError):
    """A setting from the environment has a value we cannot use."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"environment variable {name}={value!r} is invalid: expected {expected}")
        self.name = name


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise SettingError(name, raw, "a boolean (1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingError(name, raw, "an integer") from None
    if minimum is not None and value < minimum:
        raise SettingError(name, raw, f"an integer >= {minimum}")
    if maximum is not None and value > maximum:
        raise SettingError(name, raw, f"an integer <= {maximum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise SettingError(name, raw, "a number") from None
    if minimum is not None and value < minimum:
        raise SettingError(name, raw, f"a number >= {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_seconds_by_name(name: str, default: dict[str, float], names: tuple[str, ...], *,
                        maximum: float = math.inf) -> dict[str, float]:
    """'winning-post=25,window-post=1800': seconds per name (each one of ``names``); empty for none."""
    raw = os.environ.get(name)
    if raw is None:
        return dict(default)
    out: dict[str, float] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not sep or key.strip() not in names or not 0 < seconds <= maximum:  # NaN fails it too
            raise SettingError(name, raw, f"name=seconds pairs, names from {', '.join(names)}, "
                                          f"0 < seconds <= {maximum:g}")
        out[key.strip()] = seconds
    return out


def env_hosts_and_networks(name: str, default: list[str]) -> list[str]:
    """'10.0.0.0/8,hooks.example.internal': addresses or networks (CIDR) and host names, lower case."""
    import ipaddress

    out = []
    for item in env_list(name, default):
        entry = item.lower().rstrip(".")
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            if not _HOST_NAME.fullmatch(entry):
                raise SettingError(name, os.environ.get(name, ""), "addresses, networks (CIDR) or host names, "
                                                                   f"comma-separated ({item!r} is none of them)") from None
        out.append(entry)
    return out


_HOST_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise SettingError(name, raw, "one of " + ", ".join(choices))
    return value


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Parse '64GiB', '512MiB', '1.5GB' or plain bytes into a byte count."""
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 64GiB, 512MiB, 1000000)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def env_size(name: str, default: str) -> str:
    """A byte size or the word 'auto'; returned normalised as text, validated now."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.strip().lower() == "auto":
        return "auto"
    try:
        parse_size(raw)
    except ValueError:
        raise SettingError(name, raw, "'auto' or a size such as 64GiB, 512MiB or a byte count") from None
    return raw.strip()


def env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return Path(raw).expanduser().resolve() if raw else default


def env_secret_key(name: str, store: Path) -> str:
    """The secret key from the environment, else one generated once and kept in `store`."""
    raw = os.environ.get(name)
    if raw:
        return raw
    if store.exists():
        return store.read_text().strip()
    store.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    store.write_text(key)
    store.chmod(0o600)
    return key
