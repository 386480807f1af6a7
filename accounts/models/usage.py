"""One usage record per TTS request or ASR stream (accounts §6)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import ROUTE_MAX_LENGTH, Endpoint, Route, UsageStatus


class UsageRecord(models.Model):
    """One TTS request or one ASR stream (accounts §6)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    stream_id = models.UUIDField()
    request_id = models.CharField(max_length=64)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    api_key = models.ForeignKey(ApiKey, on_delete=models.PROTECT, related_name="+")
    endpoint = models.CharField(max_length=3, choices=Endpoint.choices)
    route = models.CharField(max_length=ROUTE_MAX_LENGTH, choices=Route.choices)
    model = models.CharField(max_length=100)
    status = models.CharField(
        max_length=10, choices=UsageStatus.choices, default=UsageStatus.STARTED
    )
    error_code = models.CharField(max_length=40, blank=True)
    close_code = models.PositiveIntegerField(null=True, blank=True)
    # How many requests the row stands for: 1, or the refusals of one key, route and code
    # in one hour folded into one row once a flood passes REFUSALS_KEPT (accounts.refusals).
    requests = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    last_checkpoint_at = models.DateTimeField()
    checkpoint_seq = models.PositiveIntegerField(default=0)
    period = models.CharField(max_length=7, help_text="YYYY-MM (UTC) of started_at")
    instance = models.CharField(max_length=255, help_text="host:pid of the gateway")
    tts_chars_in = models.BigIntegerField(default=0)
    tts_audio_out_ms = models.BigIntegerField(default=0)
    ttfb_ms = models.PositiveIntegerField(null=True, blank=True)
    rtf = models.FloatField(null=True, blank=True)
    asr_audio_in_ms = models.BigIntegerField(default=0)
    asr_chars_out = models.BigIntegerField(default=0)
    asr_items = models.PositiveIntegerField(default=0)
    asr_latency_ms_sum = models.BigIntegerField(default=0)
    asr_latency_ms_max = models.PositiveIntegerField(default=0)
    # Per-item latencies binned as accounts.histogram defines (empty: no items yet).
    asr_latency_hist = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["account", "started_at"], name="acct_usage_account_started"
            ),
            models.Index(
                fields=["api_key", "started_at"], name="acct_usage_key_started"
            ),
            models.Index(fields=["started_at"], name="acct_usage_started"),
            # The requests page's search by request id (the id every error body carries).
            models.Index(
                fields=["account", "request_id"], name="acct_usage_account_request"
            ),
            # The reaper's scan (accounts U10) touches only open records.
            models.Index(
                fields=["last_checkpoint_at"],
                condition=Q(status="started"),
                name="acct_usage_open_checkpoint",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.id} {self.status}"
