"""Settings, every one read from the environment with a safe default.

Embedded default (nothing set): SQLite under PROVINGSITE_DATA_DIR, the in-memory channel
layer, a secret key generated once into the data directory. Production: DATABASE_URL at
PostgreSQL, REDIS_URL at Redis, DEBUG off, PROVINGSITE_HTTPS on behind a TLS proxy.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dj_database_url

from engine.env import (
    SettingError,
    env_bool,
    env_choice,
    env_float,
    env_hosts_and_networks,
    env_int,
    env_list,
    env_path,
    env_seconds_by_name,
    env_secret_key,
    env_size,
    env_str,
)
from engine.knobs import Knobs
from engine.moments import DEADLINE_HORIZON
from engine.prover.config import process_defaults

process_defaults()  # every Django process (console, engine, tests) loads numpy and the kernels after its settings

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_path("PROVINGSITE_DATA_DIR", BASE_DIR / "data")

SECRET_KEY = env_secret_key("SECRET_KEY", DATA_DIR / "secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # its Swagger UI from our static files, not a CDN (GPU hosts are often offline)
    "engine",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "provingsite.urls"
ASGI_APPLICATION = "provingsite.asgi.application"
# The web server `runengine --serve` runs in its own process, named like ASGI_APPLICATION so the
# engine app does not import the project that wires it: Daphne with bodies bounded at header time.
WEB_SERVER = "provingsite.server.build_server"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, object]:
    url = env_str("DATABASE_URL", "")
    if not url:
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{DATA_DIR / 'provingsite.sqlite3'}"
    try:
        config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=0))
    except Exception as exc:  # dj_database_url raises several types for bad URLs
        raise SettingError("DATABASE_URL", url, f"a database URL ({exc})") from None
    if str(config["ENGINE"]).endswith("sqlite3"):
        # Engine threads and the web share one file: WAL lets readers run beside the
        # single writer, IMMEDIATE transactions make writers queue instead of deadlock.
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        config["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# The console's own login: the admin's refuses the operator group, who are not staff.
LOGIN_URL = "console-login"
LOGIN_REDIRECT_URL = "console"
LOGOUT_REDIRECT_URL = "console-login"

LANGUAGE_CODE = "en-us"
# Dates and times as the console writes them (2026-12-06 22:05:13 UTC), in the admin too.
FORMAT_MODULE_PATH = ["provingsite.formats"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"

# HTTPS hardening, on in production behind a TLS-terminating proxy.
HTTPS = env_bool("PROVINGSITE_HTTPS", False)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

LOG_LEVEL = env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error"))


def _not_progress(record: logging.LogRecord) -> bool:
    """A line per claim and per proof (``engine.progress``) would bury the rest of an engine's own
    log; it still reaches the job's page (the job-log handler) and shows here at ``debug``."""
    return not record.name.startswith("engine.progress")


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"}},
    "filters": {"no_progress": {"()": "django.utils.log.CallbackFilter", "callback": _not_progress}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": [] if LOG_LEVEL == "debug" else ["no_progress"]}},
    "loggers": {
        "engine": {"handlers": ["console"], "level": LOG_LEVEL.upper(), "propagate": False},
        "django": {"handlers": ["console"], "level": "WARNING"},
        "daphne": {"handlers": ["console"], "level": "WARNING"},
    },
}

# ---- the engine's knobs -------------------------------------------------------------
PROVINGSITE: Knobs = {
    # Host memory the engine may reserve: "auto" (RAM minus a safety margin) or a size.
    "MEMORY_BUDGET": env_size("PROVINGSITE_MEMORY_BUDGET", "auto"),
    "MEMORY_SAFETY_MARGIN": env_size("PROVINGSITE_MEMORY_SAFETY_MARGIN", "2GiB"),
    # Each CUDA device's memory the engine may reserve (its keys' resident bases, each launch's
    # buffers): "auto" (the device's total memory less the margin) or a size. Not used on "cpu".
    "DEVICE_MEMORY_BUDGET": env_size("PROVINGSITE_DEVICE_MEMORY_BUDGET", "auto"),
    "DEVICE_MEMORY_MARGIN": env_size("PROVINGSITE_DEVICE_MEMORY_MARGIN", "1GiB"),
    # The engine's processes at rest (the engine and its synthesis pool, measured at start) are
    # reserved under "engine processes", so the budget bounds the whole process tree.
    "CHARGE_PROCESSES": env_bool("PROVINGSITE_CHARGE_PROCESSES", True),
    # Fixed-base tables (engine/prover/backends/cpu/fixed_base.py) for the keys the engine keeps: shifted
    # copies of a key's small MSMs' bases, 7-10 % off a proof of up to 2^12 constraints
    # for about as much memory again as the key, counted with it.
    "FIXED_BASE": env_bool("PROVINGSITE_FIXED_BASE", True),
    # A host without a kind's keys makes development keys on first use only when asked; otherwise
    # it refuses the kind (and says so) and leaves its jobs to hosts that have the farm's keys.
    "DEV_KEYS": env_bool("PROVINGSITE_DEV_KEYS", False),
    # Synthesis processes; 0: from the cores and the devices (engine.pipeline.plan: on a GPU host
    # every core but one per device and one for the engine's own threads, on a CPU host half).
    "SYNTHESIS_CONCURRENCY": env_int("PROVINGSITE_SYNTHESIS_CONCURRENCY", 0, minimum=0, maximum=1024),
    # On a GPU host, how much lower the synthesis processes run (nice): the engine's own threads
    # (launching, recording, finishing) always get a core before another partition's synthesis does.
    "SYNTHESIS_NICE": env_int("PROVINGSITE_SYNTHESIS_NICE", 5, minimum=0, maximum=19),
    # The pacer: synthesized partitions kept waiting per device; 0: the batch size, at least 2.
    "PACE_AHEAD": env_int("PROVINGSITE_PACE_AHEAD", 0, minimum=0, maximum=1024),
    # On a GPU host, circuits whose domain has at most this many rows are proved on the CPU (a
    # lane of one worker beside the devices): at 845 constraints an H200 took 26 ms, the CPU
    # 17 (bench/results/gpu.md). 0: every partition on the devices.
    "CPU_MAX_DOMAIN": env_int("PROVINGSITE_CPU_MAX_DOMAIN", 2048, minimum=0, maximum=1 << 30),
    "WORKERS_PER_DEVICE": env_int("PROVINGSITE_WORKERS_PER_DEVICE", 2, minimum=1, maximum=64),
    # "auto" (every CUDA device, else one CPU slot), or a list such as "cuda:0,cuda:1" or "cpu".
    "DEVICES": env_str("PROVINGSITE_DEVICES", "auto"),
    "PARAMS_DIR": env_path("PROVINGSITE_PARAMS_DIR", DATA_DIR / "params"),
    "CACHE_DIR": env_path("PROVINGSITE_CACHE_DIR", BASE_DIR / ".cache"),
    "SCALE": env_choice("PROVINGSITE_SCALE", "tiny", ("tiny", "small", "medium", "large")),
    "HOST_NAME": env_str("PROVINGSITE_HOST_NAME", ""),
    "HEARTBEAT_SECONDS": env_float("PROVINGSITE_HEARTBEAT_SECONDS", 2.0, minimum=0.1),
    "LEASE_SECONDS": env_float("PROVINGSITE_LEASE_SECONDS", 15.0, minimum=1.0),
    # Placement by key (engine.ledger.placement): a host prefers partitions whose key it holds,
    # and leaves one it would load cold to a host holding that key while such a host has been
    # free within the wait. Off: first come, first served (bench/farm.py --placement's reference).
    "PLACEMENT": env_bool("PROVINGSITE_PLACEMENT", True),
    "PLACEMENT_WAIT_S": env_float("PROVINGSITE_PLACEMENT_WAIT_S", 3.0, minimum=0.0),
    # Batched proving (engine.pipeline.prove): a worker proves up to BATCH_MAX synthesized
    # partitions of one key together (one pass over the key's bases per MSM window), waiting at
    # most BATCH_WAIT_MS for more once it holds one. 1 = off: on the CPU backend a batch does not
    # beat one proof at a time (bench/batch.py: 1.00-1.08 per proof at tiny to medium scale).
    # 0: 4 on CUDA devices (one launch sequence per MSM for the four: bench/engine.py --batch),
    # off on the CPU.
    "BATCH_MAX": env_int("PROVINGSITE_BATCH_MAX", 0, minimum=0, maximum=64),
    "BATCH_WAIT_MS": env_float("PROVINGSITE_BATCH_WAIT_MS", 20.0, minimum=0.0),
    "MAX_ATTEMPTS": env_int("PROVINGSITE_MAX_ATTEMPTS", 3, minimum=1, maximum=100),
    "DRAIN_SECONDS": env_float("PROVINGSITE_DRAIN_SECONDS", 30.0, minimum=0.0),
    # A circuit's witness generator (the client's .wasm) runs at most this long per partition.
    "WITNESS_SECONDS": env_float("PROVINGSITE_WITNESS_SECONDS", 60.0, minimum=0.1),
    # A job of these kinds sent without a deadline gets one this many seconds after submission
    # (a WinningPoSt is worthless after its 30 s epoch); "" for none.
    # What an hour of this host costs, in the operator's currency: the cost per proof in
    # GET /api/v1/stats (0: not known).
    "HOST_COST_PER_HOUR": env_float("PROVINGSITE_HOST_COST_PER_HOUR", 0.0, minimum=0.0),
    "DEADLINE_OFFSETS": env_seconds_by_name("PROVINGSITE_DEADLINES", {"winning-post": 25.0},
                                            ("winning-post", "window-post", "porep-c2", "snap-update", "custom"),
                                            maximum=DEADLINE_HORIZON.total_seconds()),
    # Callbacks go only to public addresses over http(s); these addresses, networks (CIDR) or
    # host names are let through besides: an operator's own receivers (engine.ledger.callback_targets).
    "CALLBACK_ALLOW": env_hosts_and_networks("PROVINGSITE_CALLBACK_ALLOW", []),
    "UPLOAD_LIMIT": env_size("PROVINGSITE_UPLOAD_LIMIT", "256MiB"),
    # Every other request body (JSON, forms): refused at header time above this.
    "BODY_LIMIT": env_size("PROVINGSITE_BODY_LIMIT", "16KiB"),
    # Proxies whose last X-Forwarded-For hop is believed (engine/api/peer.py); none by default.
    "TRUSTED_PROXIES": env_list("PROVINGSITE_TRUSTED_PROXIES", []),
    "METRICS_TOKEN": env_str("PROVINGSITE_METRICS_TOKEN", ""),
    "METRICS_ALLOW": env_list("PROVINGSITE_METRICS_ALLOW", ["127.0.0.1", "::1"]),
    # Load shedding (off only to measure what it buys: bench/load.py). Per-token rates are
    # requests/s sustained and a burst; 0 is no limit. A client polling a job every second
    # or two is far below 20/s; operator tokens (the farm's own dashboards) are not limited.
    "LOAD_SHEDDING": env_bool("PROVINGSITE_LOAD_SHEDDING", True),
    "API_RATE": env_float("PROVINGSITE_API_RATE", 20.0, minimum=0.0),
    "API_BURST": env_int("PROVINGSITE_API_BURST", 60, minimum=1, maximum=100_000),
    "API_OPERATOR_RATE": env_float("PROVINGSITE_API_OPERATOR_RATE", 0.0, minimum=0.0),
    "API_OPERATOR_BURST": env_int("PROVINGSITE_API_OPERATOR_BURST", 200, minimum=1, maximum=100_000),
    # HTTP requests in flight at once (SSE streams apart), and how many more may wait for a
    # place, and for how long, before the answer is an immediate 503. Django serves sync
    # views on one thread, so more in flight only lengthens the line inside: 2 in flight (one
    # served, one ready) and 4 waiting for at most 50 ms gave the most polls per second at
    # the lowest p50 on 2 cores (bench/load.py).
    "ADMISSION_MAX_ACTIVE": env_int("PROVINGSITE_ADMISSION_MAX_ACTIVE", 2, minimum=1, maximum=100_000),
    "ADMISSION_MAX_WAITING": env_int("PROVINGSITE_ADMISSION_MAX_WAITING", 4, minimum=0, maximum=100_000),
    "ADMISSION_WAIT_SECONDS": env_float("PROVINGSITE_ADMISSION_WAIT_SECONDS", 0.05, minimum=0.0),
}

DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 2**20
# Django spools a request body in memory up to this, then on disk; file parts likewise.
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 2**10
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]
