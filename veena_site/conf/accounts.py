"""Settings of ``accounts``: keys, limits, metering, rollups and their periodic jobs.

docs/specs/accounts.md §5, §6, §8, §12. The dashboard's email is Django's own, in
``conf/server.py``.
"""

from __future__ import annotations

from celery.schedules import crontab

from veena_site.conf.registry import Group
from veena_site.conf.server import DATA_DIR

_accounts = Group(
    __name__,
    "Accounts: keys, limits, metering, periodic jobs",
    "See [Usage and accounts](usage.md).",
)
API_KEY_PREFIX = _accounts.env("API_KEY_PREFIX", str, "vk_live_", "prefix of new keys")
DEFAULT_PLAN_NAME = _accounts.env(
    "DEFAULT_PLAN_NAME", str, "default", "plan for accounts created without one"
)
USAGE_RECORD_RETENTION_DAYS = _accounts.env(
    "USAGE_RECORD_RETENTION_DAYS",
    int,
    90,
    "record retention (older records are purged daily)",
)
# Admin login throttling (accounts.login_throttle), counted in Django's cache.
ADMIN_LOGIN_MAX_FAILURES = _accounts.env(
    "ADMIN_LOGIN_MAX_FAILURES",
    int,
    5,
    "sign-in throttling (admin and dashboard): failed logins per username",
)
ADMIN_LOGIN_MAX_FAILURES_PER_IP = _accounts.env(
    "ADMIN_LOGIN_MAX_FAILURES_PER_IP",
    int,
    20,
    "sign-in throttling: failed logins per address",
)
ADMIN_LOGIN_LOCKOUT_S = _accounts.env(
    "ADMIN_LOGIN_LOCKOUT_S", int, 900, "sign-in throttling: the window (15 min)"
)
WEBHOOK_ALLOW_PRIVATE_ADDRESSES = _accounts.env(
    "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
    bool,
    False,
    "quota-alert webhooks may go to loopback, private and link-local addresses (off:"
    " such hosts are refused, against SSRF; [Webhooks](webhooks.md))",
)
PLAYGROUND_TOKEN_TTL_SECONDS = _accounts.env(
    "PLAYGROUND_TOKEN_TTL_SECONDS",
    int,
    600,
    "how long the client secrets the playground mints open connections (10–7200 s)",
)

API_KEY_CACHE_SECONDS = _accounts.constant(
    "API_KEY_CACHE_SECONDS",
    30.0,
    "per-process key cache (validated against the key version in Redis)",
)
KEY_VERSION_SYNC_S = _accounts.constant(
    "KEY_VERSION_SYNC_S",
    0.25,
    "embedded default: how often key versions are copied from the database into the"
    " in-process limits store, so a revocation by another process stops its streams"
    " within a second",
)
LEASE_TTL_SECONDS = _accounts.constant(
    "LEASE_TTL_SECONDS",
    30.0,
    "concurrency lease lifetime (a crashed gateway's streams free themselves within it)",
)
LEASE_RENEW_SECONDS = _accounts.constant(
    "LEASE_RENEW_SECONDS", 10.0, "concurrency lease renewal"
)
USAGE_CHECKPOINT_SECONDS = _accounts.constant(
    "USAGE_CHECKPOINT_SECONDS", 5.0, "usage checkpoints of a running stream"
)
USAGE_STALE_SECONDS = _accounts.constant(
    "USAGE_STALE_SECONDS", 15, "when the reaper calls a `started` record abandoned"
)
ASR_QUOTA_CHUNK_MS = _accounts.constant(
    "ASR_QUOTA_CHUNK_MS", 10_000, "realtime audio quota reserved at a time"
)
ROLLUP_LOOKBACK_HOURS = _accounts.constant(
    "ROLLUP_LOOKBACK_HOURS", 3, "rollup recomputation window"
)
USAGE_JOURNAL_DIR = _accounts.constant(
    "USAGE_JOURNAL_DIR",
    DATA_DIR / "usage-journal",
    "without `REDIS_URL`: the usage journal's folder, where a record's end waits until"
    " the database took it ([Accounting](accounting.md))",
    shown="`DATA_DIR/usage-journal`",
)

# The periodic jobs (accounts.tasks): how often Celery beat runs each, in seconds.
_SCHEDULE: dict[str, float | crontab] = {
    "accounts.reap_abandoned_usage": 30.0,
    "accounts.sweep_leases": 60.0,
    "accounts.rollup_usage_hourly": 300.0,
    "accounts.rollup_usage_daily": 900.0,
    "accounts.reconcile_quota_mirror": 300.0,
    "accounts.purge_usage_records": crontab(hour=3, minute=17),
    # Quota counters are current at every checkpoint: alerts follow within a minute.
    "accounts.check_quota_alerts": 30.0,
    # New webhook events go out within this; a retry is due 10 s after a failure at soonest.
    "accounts.deliver_webhooks": 10.0,
    "accounts.purge_webhook_deliveries": crontab(hour=3, minute=47),
    "accounts.purge_client_secrets": 3600.0,
    # Issue 30: records, quota counters and rollups reconciled (veena_usage_drift).
    "accounts.audit_usage": 600.0,
}
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    name: {"task": name, "schedule": schedule} for name, schedule in _SCHEDULE.items()
}
