"""Settings for the veena speech gateway, read from the environment (12-factor).

With no environment set this is the embedded default: SQLite in ``var/``, the in-process channel
layer, the CPU engines and the worker running inside the gateway process. ``REDIS_URL`` switches to
channels-redis, Redis-backed liveness and Celery on Redis; ``DATABASE_URL`` to PostgreSQL.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import environ

from gateway.redis_layer import redis_host

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

DATA_DIR = Path(env("DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def embedded_secret_key(data_dir: Path) -> str:
    """Return the dev secret kept in ``data_dir``, creating it on first start.

    The file is created 0600 in the same call that creates it (no window in which another
    user could read it); a process that loses the race to create it reads the winner's.
    """
    path = data_dir / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the creator may still be writing it
            if key := path.read_text().strip():
                return key
            time.sleep(0.02)
        raise environ.ImproperlyConfigured(f"{path} is empty") from None
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


PRODUCTION = env.bool("PRODUCTION", default=False)
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channel layer: in-process without Redis (embedded default), gateway.process_layer with it.
REDIS_URL = env("REDIS_URL", default="")
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
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}

# Engines and the worker.
TTS_ENGINE = env("TTS_ENGINE", default="piper")
ASR_ENGINE = env("ASR_ENGINE", default="faster_whisper")
WORKER_KINDS = env.list("WORKER_KINDS", default=["tts", "asr"])
CPU_COUNT = os.cpu_count() or 1
# tts Q1: Piper 8 per core; vllm-snac 4 until a measured run says otherwise (engines §5.7).
TTS_WORKER_SLOTS = env.int(
    "TTS_WORKER_SLOTS", default=4 if TTS_ENGINE == "vllm" else 8 * CPU_COUNT
)
ASR_WORKER_SLOTS = env.int("ASR_WORKER_SLOTS", default=16)
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
ENGINE_THREADS = env.int("ENGINE_THREADS", default=CPU_COUNT)
# Piper's ONNX sessions by intra-op threads (issue 13): empty = ENGINE_THREADS and 1, so a lone
# stream uses every core and many streams one each; a 1-thread session is always added.
TTS_PIPER_SESSION_THREADS = [
    int(n) for n in env.list("TTS_PIPER_SESSION_THREADS", default=[])
]
TTS_PIPER_SPINNING = env.bool("TTS_PIPER_SPINNING", default=False)
TTS_PIPER_WAIT_FOR_CORES = env.bool("TTS_PIPER_WAIT_FOR_CORES", default=True)
TTS_PIPER_SHARE_HOLD_S = env.float("TTS_PIPER_SHARE_HOLD_S", default=1.0)
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

# Limits of the TTS and realtime sockets (specs/tts-ws.md §14, specs/realtime-asr.md §2.2).
TTS_AUTH_REQUIRED = env.bool("TTS_AUTH_REQUIRED", default=True)
# ?api_key= ends up in proxy logs and browser history: off in production unless asked for.
ALLOW_QUERY_API_KEY = env.bool("ALLOW_QUERY_API_KEY", default=not PRODUCTION)
TTS_REQUEST_TIMEOUT_S = env.float("TTS_REQUEST_TIMEOUT_S", default=30.0)
TTS_MAX_TEXT_CHARS = env.int("TTS_MAX_TEXT_CHARS", default=50_000)
TTS_MAX_MESSAGE_BYTES = env.int("TTS_MAX_MESSAGE_BYTES", default=1024 * 1024)
TTS_PROGRESS_EVERY = env.int("TTS_PROGRESS_EVERY", default=10)
TTS_WS_MAX_FRAME_MS = env.int("TTS_WS_MAX_FRAME_MS", default=200)
TTS_CHUNK_WINDOW = env.int("TTS_CHUNK_WINDOW", default=32)
TTS_ADMISSION_WAIT_MS = env.int("TTS_ADMISSION_WAIT_MS", default=1000)
TTS_WORKER_ANSWER_MS = env.int("TTS_WORKER_ANSWER_MS", default=500)
TTS_OVERLOAD_RETRY_MS = env.int("TTS_OVERLOAD_RETRY_MS", default=1000)
TTS_WORKER_STALL_S = env.float("TTS_WORKER_STALL_S", default=3.0)
ASR_MAX_MESSAGE_BYTES = env.int("ASR_MAX_MESSAGE_BYTES", default=16 * 1024 * 1024)
ASR_IDLE_TIMEOUT_S = env.float("ASR_IDLE_TIMEOUT_S", default=300.0)
ASR_MAX_SESSION_S = env.int("ASR_MAX_SESSION_S", default=1800)
ASR_MAX_BUFFER_S = env.int("ASR_MAX_BUFFER_S", default=60)
ASR_MIN_COMMIT_MS = env.int("ASR_MIN_COMMIT_MS", default=100)
ASR_WORKER_ANSWER_MS = env.int("ASR_WORKER_ANSWER_MS", default=500)
ASR_ADMISSION_WAIT_MS = env.int("ASR_ADMISSION_WAIT_MS", default=1000)
ASR_WORKER_STALL_S = env.float("ASR_WORKER_STALL_S", default=3.0)
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
# Daphne's own caps; the realtime socket must carry 16 MiB messages (realtime AR-4).
WEBSOCKET_MAX_MESSAGE_BYTES = max(ASR_MAX_MESSAGE_BYTES, TTS_MAX_MESSAGE_BYTES)
# Per-stream bounds (issue 9): control events, unsent audio, early and unfinished ASR audio.
WS_CONTROL_RATE = env.float("WS_CONTROL_RATE", default=10.0)
WS_CONTROL_BURST = env.int("WS_CONTROL_BURST", default=20)
TTS_SEND_BUFFER_BYTES = env.int("TTS_SEND_BUFFER_BYTES", default=256 * 1024)
TTS_CLIENT_STALL_S = env.float("TTS_CLIENT_STALL_S", default=5.0)
ASR_MAX_EARLY_BYTES = env.int("ASR_MAX_EARLY_BYTES", default=4 * 1024 * 1024)
ASR_MAX_PENDING_S = env.int("ASR_MAX_PENDING_S", default=300)
ASR_MAX_PROMPT_CHARS = env.int("ASR_MAX_PROMPT_CHARS", default=2000)
# Both set: the gateway serves https/wss itself (veena_site/endpoints.py); neither: plain http/ws.
TLS_CERT_FILE = env("TLS_CERT_FILE", default="")
TLS_KEY_FILE = env("TLS_KEY_FILE", default="")

# Accounts (specs/accounts.md §12).
API_KEY_PREFIX = env("API_KEY_PREFIX", default="vk_live_")
DEFAULT_PLAN_NAME = env("DEFAULT_PLAN_NAME", default="default")

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
ASR_CHUNK_S = env.float("ASR_CHUNK_S", default=1.0)
ASR_UNFIXED_WORDS = env.int("ASR_UNFIXED_WORDS", default=3)
# Issue 13: a commit whose audio after the last chunk decode is silence (below ASR_SILENCE_DBFS)
# completes with that decode instead of a second full decode; a chunk decode also starts once
# ASR_PAUSE_DECODE_S of silence follows speech the last decode did not cover (0: never).
ASR_FINAL_REUSE = env.bool("ASR_FINAL_REUSE", default=True)
ASR_SILENCE_DBFS = env.float("ASR_SILENCE_DBFS", default=-50.0)
ASR_PAUSE_DECODE_S = env.float("ASR_PAUSE_DECODE_S", default=0.2)
# A shorter re-decode cadence while no other decode of the worker runs (CPU to spare).
ASR_CHUNK_MIN_S = env.float("ASR_CHUNK_MIN_S", default=1.0)
# Kinds this gateway serves; /readyz needs a live worker for each of them.
GATEWAY_KINDS = env.list("GATEWAY_KINDS", default=["tts", "asr"])
# Test-only knob: seconds the fake TTS engine waits per 100 ms chunk.
FAKE_TTS_CHUNK_DELAY_S = env.float("FAKE_TTS_CHUNK_DELAY_S", default=0.0)
USAGE_STALE_SECONDS = env.int("USAGE_STALE_SECONDS", default=15)
ROLLUP_LOOKBACK_HOURS = env.int("ROLLUP_LOOKBACK_HOURS", default=3)
# Realtime ASR settings named by specs/realtime-asr.md §2.2 that were still missing.
ASR_DIALECT = env("ASR_DIALECT", default="auto")
ASR_DEFAULT_TURN_DETECTION = env.json("ASR_DEFAULT_TURN_DETECTION", default=None)
ASR_TRIM_NONSPEECH = env.bool("ASR_TRIM_NONSPEECH", default=True)
ASR_PRECOMMIT_DELTAS = env.bool("ASR_PRECOMMIT_DELTAS", default=True)
ASR_UNFIXED_CHUNKS = env.int("ASR_UNFIXED_CHUNKS", default=2)
ASR_WINDOW_S = env.float("ASR_WINDOW_S", default=28.0)
# ASR_ENGINE=vllm: Whisper on vLLM (shared/specs/engines.md §3-4). Unset ASR_VLLM_MODEL: the
# bundled tiny.en, converted once into DATA_DIR/models (prepare_whisper_hf).
ASR_VLLM_MODEL = env("ASR_VLLM_MODEL", default="")
ASR_VLLM_DTYPE = env("ASR_VLLM_DTYPE", default="auto")
ASR_VLLM_MAX_NUM_SEQS = env.int("ASR_VLLM_MAX_NUM_SEQS", default=16)
ASR_VLLM_KV_CACHE_GIB = env.float("ASR_VLLM_KV_CACHE_GIB", default=1.0)
ASR_VLLM_MAX_MODEL_LEN = env.int("ASR_VLLM_MAX_MODEL_LEN", default=None)
ASR_VLLM_MAX_NUM_BATCHED_TOKENS = env.int(
    "ASR_VLLM_MAX_NUM_BATCHED_TOKENS", default=None
)
ASR_VLLM_ENFORCE_EAGER = env.bool("ASR_VLLM_ENFORCE_EAGER", default=True)
ASR_VLLM_PRIORITY = env.bool("ASR_VLLM_PRIORITY", default=True)
ASR_VLLM_ENGINE_ARGS = env.json("ASR_VLLM_ENGINE_ARGS", default={})
# TTS settings of specs/tts-ws.md §14 not listed above.
TTS_DRAIN_S = env.float("TTS_DRAIN_S", default=30.0)
TTS_SEGMENT_MIN_CHARS = env.int("TTS_SEGMENT_MIN_CHARS", default=20)
TTS_SEGMENT_MAX_CHARS = env.int("TTS_SEGMENT_MAX_CHARS", default=200)
# Unset: the engine's default (piper 0, vllm-snac 80).
TTS_SEGMENT_PAUSE_MS = env.int("TTS_SEGMENT_PAUSE_MS", default=None)
TTS_MAX_BUFFER_DELAY_MS = env.int("TTS_MAX_BUFFER_DELAY_MS", default=3000)
TTS_INPUT_IDLE_S = env.float("TTS_INPUT_IDLE_S", default=30.0)
TTS_CANCEL_DEADLINE_MS = env.int("TTS_CANCEL_DEADLINE_MS", default=200)
TTS_REST_TIMEOUT_S = env.float("TTS_REST_TIMEOUT_S", default=300.0)
# {"<engine>": {"<alias>": "<voice id>"}} merged over the S3 tables.
TTS_SPEAKER_ALIASES = env.json("TTS_SPEAKER_ALIASES", default={})
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

# TTS_ENGINE=vllm: a Veena/Orpheus-style checkpoint on vLLM, decoded by SNAC (engines §5).
# Both models are local directories; nothing is downloaded.
TTS_VLLM_MODEL = env("TTS_VLLM_MODEL", default="")
TTS_VLLM_RECIPE = env("TTS_VLLM_RECIPE", default="veena")  # veena | orpheus
TTS_VLLM_VOICES = env.list("TTS_VLLM_VOICES", default=[])  # empty: the recipe's voices
TTS_VLLM_DTYPE = env("TTS_VLLM_DTYPE", default="auto")
TTS_VLLM_MAX_NUM_SEQS = env.int("TTS_VLLM_MAX_NUM_SEQS", default=TTS_WORKER_SLOTS)
TTS_VLLM_MAX_MODEL_LEN = env.int("TTS_VLLM_MAX_MODEL_LEN", default=4096)
TTS_VLLM_KV_CACHE_GIB = env.int("TTS_VLLM_KV_CACHE_GIB", default=4)
# Unset: eager on CPU, CUDA graphs on a GPU.
TTS_VLLM_ENFORCE_EAGER = env.bool("TTS_VLLM_ENFORCE_EAGER", default=None)
# Sample only the next slot's audio ids (a constraint; the tiny test model needs it).
TTS_VLLM_FORCE_SLOT_ORDER = env.bool("TTS_VLLM_FORCE_SLOT_ORDER", default=False)
# VLLM_CPU_OMP_THREADS_BIND for the CPU build: "auto" gives vLLM's worker one core.
TTS_VLLM_CPU_THREADS_BIND = env("TTS_VLLM_CPU_THREADS_BIND", default="auto")
TTS_SNAC_MODEL = env("TTS_SNAC_MODEL", default="")
# Random weights when the directory has only config.json: tests and benchmarks only.
TTS_SNAC_RANDOM_INIT = env.bool("TTS_SNAC_RANDOM_INIT", default=False)
TTS_SNAC_DEVICE = env("TTS_SNAC_DEVICE", default="auto")  # auto: cuda when available
TTS_SNAC_NOISE = env.bool("TTS_SNAC_NOISE", default=True)
TTS_SNAC_MAX_BATCH = env.int("TTS_SNAC_MAX_BATCH", default=64)
TTS_SNAC_BATCH_TIMEOUT_MS = env.float("TTS_SNAC_BATCH_TIMEOUT_MS", default=2.0)
# Most frames one window emits when the decoder lags; 0: 1 on CUDA (windows then never depend
# on token timing, so seeded audio repeats exactly), 8 on CPU (fewer, longer decodes).
TTS_SNAC_MAX_STEP = env.int("TTS_SNAC_MAX_STEP", default=0)
TTS_SNAC_THREADS = env.int("TTS_SNAC_THREADS", default=max(1, CPU_COUNT - 1))

# Accounts limits, metering and periodic jobs (specs/accounts.md §5, §6, §8, §12).
from celery.schedules import crontab  # noqa: E402  (this section is appended)

REDIS_KEY_PREFIX = env("REDIS_KEY_PREFIX", default="veena:")
API_KEY_CACHE_SECONDS = env.float("API_KEY_CACHE_SECONDS", default=30.0)
# Embedded default: how often key versions are copied from the database into the in-process
# limits store, so a revocation by another process stops its streams within a second.
KEY_VERSION_SYNC_S = env.float("KEY_VERSION_SYNC_S", default=0.25)
LEASE_TTL_SECONDS = env.float("LEASE_TTL_SECONDS", default=30.0)
LEASE_RENEW_SECONDS = env.float("LEASE_RENEW_SECONDS", default=10.0)
USAGE_CHECKPOINT_SECONDS = env.float("USAGE_CHECKPOINT_SECONDS", default=5.0)
ASR_QUOTA_CHUNK_MS = env.int("ASR_QUOTA_CHUNK_MS", default=10_000)
USAGE_RECORD_RETENTION_DAYS = env.int("USAGE_RECORD_RETENTION_DAYS", default=90)
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "accounts.reap_abandoned_usage": {
        "task": "accounts.reap_abandoned_usage",
        "schedule": 30.0,
    },
    "accounts.sweep_leases": {"task": "accounts.sweep_leases", "schedule": 60.0},
    "accounts.rollup_usage_hourly": {
        "task": "accounts.rollup_usage_hourly",
        "schedule": 300.0,
    },
    "accounts.rollup_usage_daily": {
        "task": "accounts.rollup_usage_daily",
        "schedule": 900.0,
    },
    "accounts.reconcile_quota_mirror": {
        "task": "accounts.reconcile_quota_mirror",
        "schedule": 300.0,
    },
    "accounts.purge_usage_records": {
        "task": "accounts.purge_usage_records",
        "schedule": crontab(hour=3, minute=17),
    },
}
# Admin login throttling (accounts.login_throttle), counted in Django's cache.
ADMIN_LOGIN_MAX_FAILURES = env.int("ADMIN_LOGIN_MAX_FAILURES", default=5)
ADMIN_LOGIN_MAX_FAILURES_PER_IP = env.int("ADMIN_LOGIN_MAX_FAILURES_PER_IP", default=20)
ADMIN_LOGIN_LOCKOUT_S = env.int("ADMIN_LOGIN_LOCKOUT_S", default=900)
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"{REDIS_KEY_PREFIX}cache",
    }
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# Idle limit of a keep-alive TTS stream between requests (accounts §12, tts K5).
WS_IDLE_TIMEOUT_SECONDS = env.float("WS_IDLE_TIMEOUT_SECONDS", default=30.0)

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
# Served from each app's static/ without collectstatic (whitenoise finders).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
CELERY_BEAT_SCHEDULE["accounts.check_quota_alerts"] = {
    "task": "accounts.check_quota_alerts",
    "schedule": 300.0,
}
# Playground (/playground/): how long a minted browser token admits connections (accounts.tokens).
PLAYGROUND_TOKEN_TTL_SECONDS = env.int("PLAYGROUND_TOKEN_TTL_SECONDS", default=600)
