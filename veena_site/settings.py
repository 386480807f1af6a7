"""Settings for the veena speech gateway, read from the environment (12-factor).

With no environment set this is the embedded default: SQLite in ``var/``, the in-process channel
layer, the CPU engines and the worker running inside the gateway process. ``REDIS_URL`` switches to
channels-redis, Redis-backed liveness and Celery on Redis; ``DATABASE_URL`` to PostgreSQL.

Every setting is declared once, with its default and meaning, in the settings registry
(``veena_site/conf/registry.py``) by the module of its area under ``veena_site/conf/``; this
module imports them all and builds Django's structures from them (docs/settings.md lists them).
"""

from __future__ import annotations

from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from gateway.layers.redis_layer import broker_options, redis_host, sync_options

# Every setting, declared once by its area's module (veena_site/conf/registry.py).
from veena_site.conf.accounts import *  # noqa: F403  keys, limits, metering, periodic jobs
from veena_site.conf.backbone import *  # noqa: F403  database, Redis, workers
from veena_site.conf.backbone import (
    CHANNEL_CAPACITY,
    CHANNEL_EXPIRY_S,
    CHANNEL_PREFIX,
    DATABASE_CONN_MAX_AGE,
    DATABASE_URL,
    REDIS_KEY_PREFIX,
    REDIS_SOCKET_TIMEOUT_S,
    REDIS_URL,
    WORKER_CHANNEL_CAPACITY,
)
from veena_site.conf.decoding import *  # noqa: F403  Piper's runs, streaming ASR
from veena_site.conf.endpoints import *  # noqa: F403  the sockets, REST
from veena_site.conf.endpoints import ASR_MAX_MESSAGE_BYTES, TTS_MAX_MESSAGE_BYTES
from veena_site.conf.engines import *  # noqa: F403  the worker's engines, slots, vLLM
from veena_site.conf.engines import WORKER_OWN_CHANNEL_CAPACITY
from veena_site.conf.secret_key import embedded_secret_key
from veena_site.conf.server import *  # noqa: F403  the switch, security, TLS, email, logs
from veena_site.conf.server import (
    DATA_DIR,
    DEBUG,
    LOG_FORMAT,
    LOG_LEVEL,
    PRODUCTION,
    SECRET_KEY,
)

DATA_DIR.mkdir(parents=True, exist_ok=True)
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY is required when PRODUCTION=true")
    SECRET_KEY = embedded_secret_key(DATA_DIR)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "veena_site",
    "accounts",
    "tts",
    "asr",
]

MIDDLEWARE = [
    "gateway.logs.RequestIdMiddleware",
    "gateway.server.lifecycle.DrainMiddleware",  # 503 while the gateway drains (issue 31)
    "gateway.server.csp.ContentSecurityPolicyMiddleware",  # on every HTML page (issue 31)
    "django.middleware.security.SecurityMiddleware",
    # Static files (the dashboard's charts, the admin) from the app directories.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "veena_site.urls"
ASGI_APPLICATION = "veena_site.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES: dict[str, dict[str, Any]] = {
    "default": environ.Env.db_url_config(DATABASE_URL)
    if DATABASE_URL
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / "db.sqlite3")}
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads write usage rows while rollups and the reaper run. WAL lets readers
    # and one writer work at once; IMMEDIATE takes the write lock at BEGIN, where the busy
    # timeout waits for it (a deferred transaction that reads, then writes, fails at once
    # with "database is locked" when another writer holds the lock, whatever the timeout).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    )
# Django checks a kept connection before reusing it, so one that the server dropped is
# replaced, not failed.
DATABASES["default"]["CONN_MAX_AGE"] = DATABASE_CONN_MAX_AGE
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channel layer: in-process without Redis (embedded default), gateway.layers.process_layer with it.
# Every job's acks, keepalives and cancels go to its worker's channel: room for many jobs.
WORKER_CHANNEL_CAPACITIES = {
    "tts-worker": WORKER_CHANNEL_CAPACITY,
    "asr-worker": WORKER_CHANNEL_CAPACITY,
    # each worker's own submission channel (gateway.link.placement)
    "tts-worker.*": WORKER_CHANNEL_CAPACITY,
    "asr-worker.*": WORKER_CHANNEL_CAPACITY,
    "worker.*": WORKER_OWN_CHANNEL_CAPACITY,  # each worker's own channel
}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "gateway.layers.process_layer.ProcessChannelLayer",
            "CONFIG": {
                "hosts": [
                    redis_host(REDIS_URL, socket_timeout_s=REDIS_SOCKET_TIMEOUT_S)
                ],
                "prefix": CHANNEL_PREFIX,
                "expiry": CHANNEL_EXPIRY_S,
                "capacity": CHANNEL_CAPACITY,
                "channel_capacity": WORKER_CHANNEL_CAPACITIES,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "gateway.layers.memory_layer.EmbeddedChannelLayer",
            "CONFIG": {
                "expiry": CHANNEL_EXPIRY_S,
                "capacity": CHANNEL_CAPACITY,
                "channel_capacity": WORKER_CHANNEL_CAPACITIES,
            },
        }
    }

# Celery: Redis broker when REDIS_URL is set; the embedded default runs tasks eagerly.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
# Keep retrying the broker, at start-up too: a Redis restart must not end the Celery worker.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Health checks of idle connections, so none is left stale by a restart (gateway.layers.redis_layer).
CELERY_BROKER_TRANSPORT_OPTIONS = broker_options() if REDIS_URL else {}
# CELERY_BEAT_SCHEDULE: the accounts jobs, veena_site/conf/accounts.py.
CELERY_TIMEZONE = "UTC"

# The server. Daphne's own caps; the realtime socket must carry 16 MiB messages (realtime AR-4).
WEBSOCKET_MAX_MESSAGE_BYTES = max(ASR_MAX_MESSAGE_BYTES, TTS_MAX_MESSAGE_BYTES)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(
    exist_ok=True
)  # whitenoise also serves collectstatic output from here
# Served from each app's static/ without collectstatic (whitenoise finders).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"{REDIS_KEY_PREFIX}cache",
        "OPTIONS": sync_options(),
    }
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Dashboard (docs/specs/accounts.md §10): sign-in; its email settings are in conf/server.py.
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:index"
LOGOUT_REDIRECT_URL = "dashboard:login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "gateway.logs.RequestIdFilter"},
        "redact": {"()": "gateway.logs.RedactFilter"},
    },
    "formatters": {
        "json": {"()": "gateway.logs.JsonFormatter"},
        "text": {
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id", "redact"],
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "faster_whisper": {"level": "WARNING"},
    },
}
