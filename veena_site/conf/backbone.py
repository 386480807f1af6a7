"""Settings of the backbone: the database, Redis, the channel layer, workers and placement.

``veena_site/settings.py`` builds ``DATABASES``, ``CHANNEL_LAYERS``, Celery and the cache from
them. The capacity of each worker's own channel depends on its slots: ``conf/engines.py``.
"""

from __future__ import annotations

from veena_site.conf.registry import Group

_backbone = Group(
    __name__,
    "The backbone: database, Redis, channel layer, workers",
    "See [Deploy](deploy.md) and [Operations](operations.md).",
)
DATABASE_URL = _backbone.env(
    "DATABASE_URL",
    str,
    "",
    "unset: SQLite in `DATA_DIR`; e.g. `postgres://user@host:5432/db`",
)
# Connections kept open between requests (issue 17). The gateway's database calls all run on
# Channels' one database thread; at 0 each call connected anew (a PostgreSQL backend forked
# per call: 6 % of a gateway's CPU at 16 streams, py-spy) and closed again.
DATABASE_CONN_MAX_AGE = _backbone.env(
    "DATABASE_CONN_MAX_AGE",
    int,
    300,
    "seconds a database connection is kept open between requests (Django checks it"
    " before reuse); 0 connects anew for every call, which forked a PostgreSQL backend"
    " per call (see docs/deploy.md, PostgreSQL)",
)
REDIS_URL = _backbone.env(
    "REDIS_URL",
    str,
    "",
    "unset: in-process channel layer, embedded worker, eager Celery. Set: channels-redis"
    " core layer, Redis liveness, Celery broker",
)
REDIS_KEY_PREFIX = _backbone.env(
    "REDIS_KEY_PREFIX",
    str,
    "veena:",
    "prefix of every Redis key of the limits store and the cache",
)
CHANNEL_PREFIX = _backbone.env(
    "CHANNEL_PREFIX",
    str,
    "veena",
    "Redis key prefix of the channel layer and liveness",
)
CHANNEL_CAPACITY = _backbone.env(
    "CHANNEL_CAPACITY",
    int,
    100,
    "channel-layer limit: messages a channel holds (`ChannelFull` beyond)",
)
WORKER_CHANNEL_CAPACITY = _backbone.env(
    "WORKER_CHANNEL_CAPACITY",
    int,
    500,
    "channel-layer limit of the workers' shared and own submission channels",
)
WORKER_KINDS = _backbone.env(
    "WORKER_KINDS", list, ["tts", "asr"], "kinds a worker serves"
)
GATEWAY_KINDS = _backbone.env(
    "GATEWAY_KINDS",
    list,
    ["tts", "asr"],
    "kinds `/readyz` requires a worker for; their WebSocket consumers load at start,"
    " another kind's on its first connection (a TTS-only gateway leaves out the realtime"
    " consumer and the OpenAI SDK's event models, ~48 MiB of RSS, until a client opens"
    " `/v1/realtime`)",
)

CHANNEL_EXPIRY_S = _backbone.constant(
    "CHANNEL_EXPIRY_S",
    60,
    "channel-layer limit: seconds a message waits before it is dropped",
)
REDIS_SOCKET_TIMEOUT_S = _backbone.constant(
    "REDIS_SOCKET_TIMEOUT_S",
    30.0,
    "channel-layer Redis read timeout; must exceed the layer's 5 s blocking receive",
)
WORKER_HEARTBEAT_S = _backbone.constant(
    "WORKER_HEARTBEAT_S", 1.0, "liveness beacon period; per-job heartbeat period"
)
WORKER_TTL_S = _backbone.constant(
    "WORKER_TTL_S",
    5.0,
    "liveness beacon lifetime (a worker silent this long is gone)",
)
WORKER_PLACEMENT = _backbone.constant(
    "WORKER_PLACEMENT",
    "least_loaded",
    "where a job's first message goes (gateway.link.placement): `least_loaded` to the live"
    " worker with the most free slots, on that worker's own channel; `shared` to the"
    " shared channel of its kind, whichever worker pops it first (busy workers answer"
    " busy and the gateway retries). `bench/admission.py` measures both",
)
JOB_KEEPALIVE_S = _backbone.constant(
    "JOB_KEEPALIVE_S",
    1.0,
    "gateway → worker keepalive period of a job (gateway.worker.jobs)",
)
JOB_KEEPALIVE_TIMEOUT_S = _backbone.constant(
    "JOB_KEEPALIVE_TIMEOUT_S",
    5.0,
    "gateway silence after which a worker ends a job",
)
