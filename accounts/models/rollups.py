"""Usage summed per bucket: per key (UsageRollup) and per account (AccountRollup)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import ROUTE_MAX_LENGTH, Endpoint, Granularity, Route

# The columns that name one UsageRollup row, and one AccountRollup row (no key column).
ROLLUP_KEY = (
    "granularity",
    "bucket_start",
    "account",
    "api_key",
    "endpoint",
    "route",
    "model",
    "error_code",
)
ACCOUNT_ROLLUP_KEY = tuple(name for name in ROLLUP_KEY if name != "api_key")
# The request counts of a row: every request, then those of each ending (UsageStatus).
OUTCOME_COUNTS = ("requests", "completed", "cancelled", "failed", "abandoned")


class RollupMeasures(models.Model):
    """What a rollup row sums (accounts §7, G3), shared by the key and account rollups."""

    granularity = models.CharField(max_length=4, choices=Granularity.choices)
    bucket_start = models.DateTimeField()
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    endpoint = models.CharField(max_length=3, choices=Endpoint.choices)
    route = models.CharField(max_length=ROUTE_MAX_LENGTH, choices=Route.choices)
    model = models.CharField(max_length=100)
    # Blank for every record without one; failures are split by code.
    error_code = models.CharField(max_length=40, blank=True)
    requests = models.BigIntegerField(default=0)
    completed = models.BigIntegerField(default=0)
    cancelled = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    abandoned = models.BigIntegerField(default=0)
    tts_chars_in = models.BigIntegerField(default=0)
    tts_audio_out_ms = models.BigIntegerField(default=0)
    tts_duration_ms = models.BigIntegerField(default=0)
    ttfb_ms_sum = models.BigIntegerField(default=0)
    ttfb_count = models.BigIntegerField(default=0)
    ttfb_ms_max = models.BigIntegerField(default=0)
    asr_audio_in_ms = models.BigIntegerField(default=0)
    asr_chars_out = models.BigIntegerField(default=0)
    asr_items = models.BigIntegerField(default=0)
    asr_latency_ms_sum = models.BigIntegerField(default=0)
    asr_latency_ms_max = models.BigIntegerField(default=0)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.granularity} {self.bucket_start:%Y-%m-%d %H:%M} {self.endpoint}"


# One count per latency bin (accounts.histogram): TTS time to first byte, ASR
# commit→completed per item. Summing a column merges histograms.
for _name in (*TTFB_FIELDS, *ASR_LATENCY_FIELDS):
    RollupMeasures.add_to_class(_name, models.BigIntegerField(default=0))


class UsageRollup(RollupMeasures):
    """Usage summed per hour or day, account, key, endpoint and model (accounts §7)."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            # Every key column is NOT NULL, so PostgreSQL cannot let duplicates in (G2).
            models.UniqueConstraint(
                fields=list(ROLLUP_KEY), name="acct_rollup_key_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["account", "granularity", "bucket_start"],
                name="acct_rollup_account_bucket",
            ),
            models.Index(
                fields=["api_key", "granularity", "bucket_start"],
                name="acct_rollup_key_bucket",
            ),
        ]


class AccountRollup(RollupMeasures):
    """UsageRollup summed over the account's keys: what charts read when no key is picked.

    Rebuilt from the UsageRollup rows in the same transaction, so the two always agree;
    an account with 50 keys has about 50 times fewer rows here.
    """

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=list(ACCOUNT_ROLLUP_KEY), name="acct_account_rollup_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["account", "granularity", "bucket_start"],
                name="acct_arollup_account_bucket",
            ),
            models.Index(
                fields=["granularity", "bucket_start"], name="acct_arollup_bucket"
            ),
        ]
