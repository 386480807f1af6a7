"""Quota alerts: thresholds fire once per period, by email and webhook, from the periodic job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest

from accounts import tasks
from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlert
from accounts.models.audit import AuditLog
from accounts.models.plans import Plan
from accounts.models.quota import QuotaCounter
from accounts.models.webhooks import WebhookDelivery
from accounts.services.alerts import (
    MAX_DELIVERY_ATTEMPTS,
    alert_settings_update,
    crossed,
    quota_alerts_check,
)
from accounts.services.quota_overrides import quota_override_create
from accounts.services.webhooks import RETRY_DELAYS_S, webhook_deliver_due
from tests.support.receiver import serving

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 9, 20, 12, tzinfo=UTC)


@pytest.fixture
def account(django_user_model):
    plan = Plan.objects.create(
        name="alerts",
        requests_per_minute=10,
        max_concurrent_streams=2,
        monthly_tts_characters=1000,
        monthly_asr_seconds=100,
        max_session_seconds=600,
    )
    account = Account.objects.create(name="Acme", slug="acme", plan=plan)
    account.members.add(
        django_user_model.objects.create_user("m", "m@example.com", "pw")
    )
    return account


def use(account, metric: str, used: int, period: str = "2026-09") -> None:
    QuotaCounter.objects.update_or_create(
        account=account, period=period, metric=metric, defaults={"used": used}
    )


class Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 204

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers["Content-Length"])
        Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(Hook.status)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook():
    Hook.received, Hook.status = [], 204
    with serving(Hook) as url:
        yield url, Hook


def test_crossed_thresholds() -> None:
    assert crossed(799, 1000, [80, 95, 100]) == []
    assert crossed(800, 1000, [80, 95, 100]) == [80]
    assert crossed(1200, 1000, [80, 95, 100]) == [80, 95, 100]
    assert crossed(5, 0, [80]) == []


def test_each_threshold_fires_once_per_period_and_metric(account, mailoutbox) -> None:
    use(account, "tts_characters", 850)
    assert quota_alerts_check(now=NOW) == 1
    assert quota_alerts_check(now=NOW) == 0  # dedup: same period, same threshold
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["m@example.com"]
    assert "80%" in mailoutbox[0].subject
    assert "850 of 1,000 characters" in mailoutbox[0].body
    use(account, "tts_characters", 990)
    use(account, "asr_audio_ms", 100_000)  # 100 s of 100 s: every ASR threshold
    assert quota_alerts_check(now=NOW) == 4
    assert quota_alerts_check(now=NOW) == 0
    assert len(mailoutbox) == 5
    fired = set(QuotaAlert.objects.values_list("metric", "threshold"))
    assert fired == {
        ("tts_characters", 80),
        ("tts_characters", 95),
        ("asr_audio_ms", 80),
        ("asr_audio_ms", 95),
        ("asr_audio_ms", 100),
    }
    # A new month starts over.
    use(account, "tts_characters", 900, period="2026-10")
    assert quota_alerts_check(now=datetime(2026, 10, 2, tzinfo=UTC)) == 1


def test_an_alert_goes_to_the_webhook_once_and_is_retried_there(
    account, webhook, mailoutbox
) -> None:
    url, hook = webhook
    alert_settings_update(
        account=account,
        actor=None,
        actor_label="t",
        fields={"webhook_url": url, "email_enabled": False, "thresholds": [50]},
    )
    hook.status = 500
    use(account, "tts_characters", 600)
    assert quota_alerts_check(now=NOW) == 1
    assert tasks.deliver_webhooks() == 1  # the periodic task's first attempt
    alert = QuotaAlert.objects.get()
    delivery = WebhookDelivery.objects.get(alert=alert)
    assert (delivery.status, delivery.last_error) == ("pending", "HTTP 500")
    assert alert.webhook_sent_at is None
    hook.status = 204
    assert webhook_deliver_due(now=delivery.next_attempt_at) == 1
    alert.refresh_from_db()
    assert alert.webhook_sent_at is not None
    event = hook.received[-1]
    assert (event["type"], event["account"]) == ("quota.threshold_reached", "acme")
    assert event["data"]["threshold_percent"] == 50 and event["data"]["used"] == 600
    assert event["data"]["limit"] == 1000 and event["data"]["unit"] == "characters"
    assert len(mailoutbox) == 0
    quota_alerts_check(now=NOW)
    assert webhook_deliver_due(now=NOW + timedelta(days=1)) == 0
    assert len(hook.received) == 2  # one failed attempt, one delivery; never again
    assert WebhookDelivery.objects.count() == 1
    assert (
        AuditLog.objects.filter(action="alerts.changed", account=account).count() == 1
    )


def test_alerts_use_the_effective_limit(account, mailoutbox) -> None:
    """A top-up raises the limit the thresholds are shares of (issue 32)."""
    quota_override_create(
        account=account,
        metric="tts_characters",
        kind="top_up",
        amount=1000,
        ends_at=datetime(2026, 10, 1, tzinfo=UTC),
        reason="launch week",
        actor=None,
        actor_label="t",
        now=NOW - timedelta(days=1),
    )
    use(account, "tts_characters", 1500)
    assert quota_alerts_check(now=NOW) == 0  # 1500 of 2000: under 80 %
    use(account, "tts_characters", 1600)
    assert quota_alerts_check(now=NOW) == 1
    assert QuotaAlert.objects.get().limit == 2000


def test_an_unreachable_mail_server_is_tried_a_bounded_number_of_times(
    account, settings
) -> None:
    settings.EMAIL_BACKEND = "tests.accounts.test_alerts.FailingEmail"
    use(account, "tts_characters", 1000)
    for _ in range(MAX_DELIVERY_ATTEMPTS + 2):
        quota_alerts_check(now=NOW)
    assert set(QuotaAlert.objects.values_list("attempts", flat=True)) == {
        MAX_DELIVERY_ATTEMPTS
    }


class FailingEmail:
    """An email backend whose server never answers."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def send_messages(self, messages) -> int:
        raise ConnectionRefusedError("no mail server")


def test_the_periodic_task_is_scheduled_for_beat_and_the_embedded_scheduler(
    settings,
) -> None:
    assert (
        settings.CELERY_BEAT_SCHEDULE["accounts.check_quota_alerts"]["task"]
        == "accounts.check_quota_alerts"
    )
    assert (
        tasks.PERIODIC_TASKS["accounts.check_quota_alerts"] is tasks.check_quota_alerts
    )
    assert tasks.check_quota_alerts() == 0
    entry = settings.CELERY_BEAT_SCHEDULE["accounts.deliver_webhooks"]
    assert entry["schedule"] <= RETRY_DELAYS_S[0]
    assert tasks.PERIODIC_TASKS["accounts.deliver_webhooks"] is tasks.deliver_webhooks
    assert "accounts.purge_webhook_deliveries" in settings.CELERY_BEAT_SCHEDULE
    assert tasks.purge_webhook_deliveries() == 0
