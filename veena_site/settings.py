"""Settings for the veena speech gateway, read from the environment (12-factor).

With no environment set this is the embedded default: SQLite in ``var/``, the in-process channel
layer, the CPU engines and the worker running inside the gateway process. ``REDIS_URL`` switches to
channels-redis, Redis-backed liveness and Celery on Redis; ``DATABASE_URL`` to PostgreSQL.

Django's own settings, the backbone and the limits of each endpoint are here; two whole
areas are modules of ``veena_site/conf/`` imported below: ``engines`` (the worker side) and
``accounts``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ

from gateway.redis_layer import redis_host

# Whole areas, each in its own module that reads its own variables (veena_site/conf):
from veena_site.conf.accounts import *  # noqa: F403  keys, limits, metering, periodic jobs
from veena_site.conf.engines import *  # noqa: F403  the worker's engines, slots, decoding
from veena_site.conf.engines import (  # sizes the worker channel
    ASR_WORKER_SLOTS,
    TTS_WORKER_SLOTS,
)
from veena_site.conf.environment import PRODUCTION, env
from veena_site.conf.secret_key import embedded_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(env("DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)
# Without REDIS_URL, the usage journal's folder (accounts.journal, docs/accounting.md).
USAGE_JOURNAL_DIR = Path(
    env("USAGE_JOURNAL_DIR", default=str(DATA_DIR / "usage-journal"))
)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default="")
if not SECRET_KEY:
    if PRODUCTION:
        raise environ.ImproperlyConfigured(
            "SECRET_KEY is required when PRODUCTION=true"
        )
    SECRET_KEY = embedded_secret_key(DATA_DIR)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

# HTTPS behind a proxy (PRODUCTION=true): cookies only over HTTPS, and what the proxy says.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=PRODUCTION)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=PRODUCTION)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# e.g. "HTTP_X_FORWARDED_PROTO,https": the header and value a trusted proxy sets for HTTPS.
_proxy_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_header and len(_proxy_header) != 2:
    raise environ.ImproperlyConfigured(
        "SECURE_PROXY_SSL_HEADER must be HEADER,VALUE (e.g. HTTP_X_FORWARDED_PROTO,https)"
    )
SECURE_PROXY_SSL_HEADER = tuple(_proxy_header) if _proxy_header else None
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False
)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)

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

DATABASE_URL = env("DATABASE_URL", default="")
DATABASES: dict[str, dict[str, Any]] = {
    "default": env.db_url_config(DATABASE_URL)
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
# Connections kept open between requests (issue 17). The gateway's database calls all run on
# Channels' one database thread; at 0 each call connected anew (a PostgreSQL backend forked
# per call: 6 % of a gateway's CPU at 16 streams, py-spy) and closed again. Django checks a
# kept connection before reusing it, so one that the server dropped is replaced, not failed.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=300)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channel layer: in-process without Redis (embedded default), gateway.process_layer with it.
REDIS_URL = env("REDIS_URL", default="")
# Prefix of every Redis key of the limits store and the cache.
REDIS_KEY_PREFIX = env("REDIS_KEY_PREFIX", default="veena:")
CHANNEL_CAPACITY = env.int("CHANNEL_CAPACITY", default=100)
WORKER_CHANNEL_CAPACITY = env.int("WORKER_CHANNEL_CAPACITY", default=500)
CHANNEL_EXPIRY_S = env.int("CHANNEL_EXPIRY_S", default=60)
REDIS_SOCKET_TIMEOUT_S = env.float("REDIS_SOCKET_TIMEOUT_S", default=30.0)
# Every job's acks, keepalives and cancels go to its worker's channel: room for many jobs.
WORKER_CHANNEL_CAPACITIES = {
    "tts-worker": WORKER_CHANNEL_CAPACITY,
    "asr-worker": WORKER_CHANNEL_CAPACITY,
    # each worker's own submission channel (gateway.placement)
    "tts-worker.*": WORKER_CHANNEL_CAPACITY,
    "asr-worker.*": WORKER_CHANNEL_CAPACITY,
}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "gateway.process_layer.ProcessChannelLayer",
            "CONFIG": {
                "hosts": [
                    redis_host(REDIS_URL, socket_timeout_s=REDIS_SOCKET_TIMEOUT_S)
                ],
                "prefix": env("CHANNEL_PREFIX", default="veena"),
                "expiry": CHANNEL_EXPIRY_S,
                "capacity": CHANNEL_CAPACITY,
                "channel_capacity": WORKER_CHANNEL_CAPACITIES,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "gateway.memory_layer.EmbeddedChannelLayer",
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
# CELERY_BEAT_SCHEDULE: the accounts jobs, veena_site/conf/accounts.py.
CELERY_TIMEZONE = "UTC"

# The gateway↔worker backbone.
WORKER_KINDS = env.list("WORKER_KINDS", default=["tts", "asr"])
# Kinds this gateway serves; /readyz needs a live worker for each of them.
GATEWAY_KINDS = env.list("GATEWAY_KINDS", default=["tts", "asr"])
# Each worker's own channel ("worker.", veena_site.worker) takes every running job's acks,
# keepalives, cancels and ASR audio: room for WORKER_CHANNEL_PER_JOB messages per slot. At the
# shared default it filled at ~40 concurrent jobs; ProcessChannelLayer gives the prefix its
# own capacity without starving it behind the consumers' channels.
WORKER_CHANNEL_PER_JOB = 16
WORKER_OWN_CHANNEL_CAPACITY = env.int(
    "WORKER_OWN_CHANNEL_CAPACITY",
    default=max(
        WORKER_CHANNEL_CAPACITY,
        WORKER_CHANNEL_PER_JOB * (TTS_WORKER_SLOTS + ASR_WORKER_SLOTS),
    ),
)
WORKER_CHANNEL_CAPACITIES["worker.*"] = WORKER_OWN_CHANNEL_CAPACITY
WORKER_HEARTBEAT_S = env.float("WORKER_HEARTBEAT_S", default=1.0)
WORKER_TTL_S = env.float("WORKER_TTL_S", default=5.0)
# Where a job's first message goes (gateway.placement): "least_loaded" sends it to the live
# worker with the most free slots, on that worker's own channel; "shared" to the shared channel
# of its kind, whichever worker pops it first (busy workers answer busy and the gateway retries).
WORKER_PLACEMENT = env("WORKER_PLACEMENT", default="least_loaded")
# Gateway → worker liveness per job: a keepalive every JOB_KEEPALIVE_S; a worker ends a job
# whose gateway has been silent for JOB_KEEPALIVE_TIMEOUT_S (gateway.jobs).
JOB_KEEPALIVE_S = env.float("JOB_KEEPALIVE_S", default=1.0)
JOB_KEEPALIVE_TIMEOUT_S = env.float("JOB_KEEPALIVE_TIMEOUT_S", default=5.0)

# Both sockets (specs/tts-ws.md §14, specs/realtime-asr.md §2.2).
# ?api_key= ends up in proxy logs and browser history: off in production unless asked for.
ALLOW_QUERY_API_KEY = env.bool("ALLOW_QUERY_API_KEY", default=not PRODUCTION)
# Per-stream bounds (issue 9): control events; unsent audio and ASR audio below.
WS_CONTROL_RATE = env.float("WS_CONTROL_RATE", default=10.0)
WS_CONTROL_BURST = env.int("WS_CONTROL_BURST", default=20)

# The TTS socket and POST /v1/tts (specs/tts-ws.md §14).
TTS_AUTH_REQUIRED = env.bool("TTS_AUTH_REQUIRED", default=True)
TTS_REQUEST_TIMEOUT_S = env.float("TTS_REQUEST_TIMEOUT_S", default=30.0)
# Idle limit of a keep-alive TTS stream between requests (accounts §12, tts K5).
WS_IDLE_TIMEOUT_SECONDS = env.float("WS_IDLE_TIMEOUT_SECONDS", default=30.0)
TTS_INPUT_IDLE_S = env.float("TTS_INPUT_IDLE_S", default=30.0)
TTS_MAX_BUFFER_DELAY_MS = env.int("TTS_MAX_BUFFER_DELAY_MS", default=3000)
TTS_MAX_TEXT_CHARS = env.int("TTS_MAX_TEXT_CHARS", default=50_000)
TTS_MAX_MESSAGE_BYTES = env.int("TTS_MAX_MESSAGE_BYTES", default=1024 * 1024)
TTS_SEGMENT_MIN_CHARS = env.int("TTS_SEGMENT_MIN_CHARS", default=20)
TTS_SEGMENT_MAX_CHARS = env.int("TTS_SEGMENT_MAX_CHARS", default=200)
TTS_PROGRESS_EVERY = env.int("TTS_PROGRESS_EVERY", default=10)
TTS_WS_MAX_FRAME_MS = env.int("TTS_WS_MAX_FRAME_MS", default=200)
TTS_CHUNK_WINDOW = env.int("TTS_CHUNK_WINDOW", default=32)
TTS_SEND_BUFFER_BYTES = env.int("TTS_SEND_BUFFER_BYTES", default=256 * 1024)
TTS_CLIENT_STALL_S = env.float("TTS_CLIENT_STALL_S", default=5.0)
TTS_ADMISSION_WAIT_MS = env.int("TTS_ADMISSION_WAIT_MS", default=1000)
TTS_WORKER_ANSWER_MS = env.int("TTS_WORKER_ANSWER_MS", default=500)
TTS_OVERLOAD_RETRY_MS = env.int("TTS_OVERLOAD_RETRY_MS", default=1000)
TTS_WORKER_STALL_S = env.float("TTS_WORKER_STALL_S", default=3.0)
TTS_CANCEL_DEADLINE_MS = env.int("TTS_CANCEL_DEADLINE_MS", default=200)
TTS_DRAIN_S = env.float("TTS_DRAIN_S", default=30.0)
TTS_REST_TIMEOUT_S = env.float("TTS_REST_TIMEOUT_S", default=300.0)
# {"<engine>": {"<alias>": "<voice id>"}} merged over the S3 tables.
TTS_SPEAKER_ALIASES = env.json("TTS_SPEAKER_ALIASES", default={})

# The realtime ASR socket (specs/realtime-asr.md §2.2).
ASR_MODEL = env("ASR_MODEL", default="whisper-tiny.en")
ASR_MODEL_ALIASES = env.list(
    "ASR_MODEL_ALIASES",
    default=[
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-4o-mini-transcribe",
        "gpt-realtime-whisper",
    ],
)
ASR_DIALECT = env("ASR_DIALECT", default="auto")
ASR_DEFAULT_TURN_DETECTION = env.json("ASR_DEFAULT_TURN_DETECTION", default=None)
ASR_TRIM_NONSPEECH = env.bool("ASR_TRIM_NONSPEECH", default=True)
ASR_PRECOMMIT_DELTAS = env.bool("ASR_PRECOMMIT_DELTAS", default=True)
ASR_MAX_MESSAGE_BYTES = env.int("ASR_MAX_MESSAGE_BYTES", default=16 * 1024 * 1024)
ASR_IDLE_TIMEOUT_S = env.float("ASR_IDLE_TIMEOUT_S", default=300.0)
ASR_MAX_SESSION_S = env.int("ASR_MAX_SESSION_S", default=1800)
ASR_MAX_BUFFER_S = env.int("ASR_MAX_BUFFER_S", default=60)
ASR_MIN_COMMIT_MS = env.int("ASR_MIN_COMMIT_MS", default=100)
ASR_MAX_EARLY_BYTES = env.int("ASR_MAX_EARLY_BYTES", default=4 * 1024 * 1024)
ASR_MAX_PENDING_S = env.int("ASR_MAX_PENDING_S", default=300)
ASR_MAX_PROMPT_CHARS = env.int("ASR_MAX_PROMPT_CHARS", default=2000)
ASR_WORKER_ANSWER_MS = env.int("ASR_WORKER_ANSWER_MS", default=500)
ASR_ADMISSION_WAIT_MS = env.int("ASR_ADMISSION_WAIT_MS", default=1000)
ASR_WORKER_STALL_S = env.float("ASR_WORKER_STALL_S", default=3.0)

# OpenAI-compatible REST (openai_rest): model aliases of the TTS engine, OpenAI voice names
# mapped to our speakers (unmapped ones speak with the default speaker), and the caps.
OPENAI_TTS_MODEL_ALIASES = env.list(
    "OPENAI_TTS_MODEL_ALIASES", default=["tts-1", "tts-1-hd", "gpt-4o-mini-tts"]
)
OPENAI_TTS_VOICES = env.json("OPENAI_TTS_VOICES", default={})
OPENAI_SPEECH_MAX_INPUT_CHARS = env.int("OPENAI_SPEECH_MAX_INPUT_CHARS", default=4096)
OPENAI_TRANSCRIBE_MAX_BYTES = env.int(
    "OPENAI_TRANSCRIBE_MAX_BYTES", default=25 * 1024 * 1024
)
OPENAI_TRANSCRIBE_MAX_SECONDS = env.float(
    "OPENAI_TRANSCRIBE_MAX_SECONDS", default=1500.0
)
OPENAI_TRANSCRIBE_TIMEOUT_S = env.float("OPENAI_TRANSCRIBE_TIMEOUT_S", default=600.0)

# The server. Daphne's own caps; the realtime socket must carry 16 MiB messages (realtime AR-4).
WEBSOCKET_MAX_MESSAGE_BYTES = max(ASR_MAX_MESSAGE_BYTES, TTS_MAX_MESSAGE_BYTES)
# Both set: the gateway serves https/wss itself (veena_site/endpoints.py); neither: plain http/ws.
TLS_CERT_FILE = env("TLS_CERT_FILE", default="")
TLS_KEY_FILE = env("TLS_KEY_FILE", default="")

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
    }
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Dashboard (specs/accounts.md §10): sign-in, password reset by email, quota alerts.
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:index"
LOGOUT_REDIRECT_URL = "dashboard:login"
EMAIL_BACKEND = env(
    "EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="veena@localhost")

LOG_FORMAT = env("LOG_FORMAT", default="json" if PRODUCTION else "text")
LOG_LEVEL = env("LOG_LEVEL", default="INFO")
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
