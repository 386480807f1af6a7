"""Settings of ``accounts``: keys, limits, metering, rollups and their periodic jobs.

specs/accounts.md §5, §6, §8, §12. The dashboard's sign-in and email are Django's own
settings, in ``veena_site/settings.py``.
"""

from __future__ import annotations

from celery.schedules import crontab

from veena_site.conf.environment import env

API_KEY_PREFIX = env("API_KEY_PREFIX", default="vk_live_")
DEFAULT_PLAN_NAME = env("DEFAULT_PLAN_NAME", default="default")
API_KEY_CACHE_SECONDS = env.float("API_KEY_CACHE_SECONDS", default=30.0)
# Embedded default: how often key versions are copied from the database into the in-process
# limits store, so a revocation by another process stops its streams within a second.
KEY_VERSION_SYNC_S = env.float("KEY_VERSION_SYNC_S", default=0.25)
LEASE_TTL_SECONDS = env.float("LEASE_TTL_SECONDS", default=30.0)
LEASE_RENEW_SECONDS = env.float("LEASE_RENEW_SECONDS", default=10.0)
USAGE_CHECKPOINT_SECONDS = env.float("USAGE_CHECKPOINT_SECONDS", default=5.0)
USAGE_STALE_SECONDS = env.int("USAGE_STALE_SECONDS", default=15)
ASR_QUOTA_CHUNK_MS = env.int("ASR_QUOTA_CHUNK_MS", default=10_000)
ROLLUP_LOOKBACK_HOURS = env.int("ROLLUP_LOOKBACK_HOURS", default=3)
USAGE_RECORD_RETENTION_DAYS = env.int("USAGE_RECORD_RETENTION_DAYS", default=90)
# Admin login throttling (accounts.login_throttle), counted in Django's cache.
ADMIN_LOGIN_MAX_FAILURES = env.int("ADMIN_LOGIN_MAX_FAILURES", default=5)
ADMIN_LOGIN_MAX_FAILURES_PER_IP = env.int("ADMIN_LOGIN_MAX_FAILURES_PER_IP", default=20)
ADMIN_LOGIN_LOCKOUT_S = env.int("ADMIN_LOGIN_LOCKOUT_S", default=900)
# Playground (/playground/): how long a minted browser token admits connections (accounts.tokens).
PLAYGROUND_TOKEN_TTL_SECONDS = env.int("PLAYGROUND_TOKEN_TTL_SECONDS", default=600)

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
    "accounts.audit_usage": 600.0,
}
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    name: {"task": name, "schedule": schedule} for name, schedule in _SCHEDULE.items()
}
