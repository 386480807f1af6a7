"""Signed, retried webhooks: the signature, the account's secret, deliveries and retries.

Signature (Stripe's scheme, docs/webhooks.md): every POST carries
``Veena-Signature: t=<unix seconds>,v1=<hex>``, the hex being HMAC-SHA256, keyed with the
account's secret (the whole ``whsec_…`` string as UTF-8), of ``f"{t}.{body}"``. For
``SECRET_GRACE`` after a rotation a second ``v1=`` is made with the previous secret, so a
receiver can switch over without refusing a delivery.

Deliveries: ``webhook_enqueue`` stores the event with its body fixed (each retry sends the
same bytes and ``id``), due at once. The periodic Celery task ``accounts.deliver_webhooks``
(every 10 s; in-process in the embedded default) attempts every due delivery; a caller that
wants the outcome now (the "send test" buttons) enqueues ``accounts.deliver_webhook`` for
it on commit, which runs inline in the embedded default. An attempt claims the row with one
conditional UPDATE, so two workers never send the same attempt. A status outside 2xx, a
redirect, no answer within ``TIMEOUT_S``, or a host that resolves to a loopback, private
or link-local address (unless ``WEBHOOK_ALLOW_PRIVATE_ADDRESSES``; checked where the socket
connects, ``accounts.services.public_http``) fails the attempt, and
the next is due after ``RETRY_DELAYS_S``; after the last, the delivery has failed for
good. Every outcome stays on the row, which the alerts page lists.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.keys import BASE62
from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlert, QuotaAlertSettings
from accounts.models.choices import AuditAction, WebhookStatus
from accounts.models.webhooks import WebhookDelivery
from accounts.services.audit import audit_log_write
from accounts.services.public_http import NotConnected, public_opener
from gateway.wording import count

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "Veena-Signature"
SECRET_PREFIX = "whsec_"
SECRET_RANDOM_LENGTH = 32
# The previous secret signs too for this long after a rotation.
SECRET_GRACE = timedelta(hours=24)
# Waits before the 2nd, 3rd, … attempt: about 8.6 hours from the first to the last.
RETRY_DELAYS_S = (10, 60, 300, 1800, 7200, 21600)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
TIMEOUT_S = 5.0
# An attempt in progress holds its row this long, then another may take it over.
CLAIM = timedelta(seconds=60)
USER_AGENT = "veena-gateway-webhooks"
TEST_EVENT = "webhook.test"
# At most one test event per account this often: the button cannot flood a receiver.
TEST_INTERVAL = timedelta(seconds=10)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}.{body}"`` keyed with ``secret``."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secrets_: Sequence[str], timestamp: int, body: bytes) -> str:
    """``t=<timestamp>,v1=<hex>[,v1=<hex>]``: one ``v1`` per signing secret."""
    signatures = (f"v1={sign(secret, timestamp, body)}" for secret in secrets_)
    return ",".join([f"t={timestamp}", *signatures])


def secret_generate() -> str:
    """A new signing secret: ``whsec_`` and 32 base62 characters (about 190 bits)."""
    random = "".join(secrets.choice(BASE62) for _ in range(SECRET_RANDOM_LENGTH))
    return SECRET_PREFIX + random


def signing_secrets(config: QuotaAlertSettings, now: datetime) -> list[str]:
    """The current secret, then the previous one while its grace lasts."""
    found = [config.webhook_secret] if config.webhook_secret else []
    expires = config.previous_secret_expires_at
    if config.previous_webhook_secret and expires is not None and expires > now:
        found.append(config.previous_webhook_secret)
    return found


def secret_set(config: QuotaAlertSettings, now: datetime) -> tuple[str, str]:
    """Give ``config`` a new secret, keeping the old one for the grace period; return
    the old and new hints. The caller saves and audits."""
    before = config.secret_hint
    if config.webhook_secret:
        config.previous_webhook_secret = config.webhook_secret
        config.previous_secret_expires_at = now + SECRET_GRACE
    config.webhook_secret = secret_generate()
    return before, config.secret_hint


def webhook_secret_rotate(
    *,
    account: Account,
    actor: User | None,
    actor_label: str,
    now: datetime | None = None,
) -> str:
    """Make the account a new signing secret and return it: the only time it is shown."""
    moment = now or timezone.now()
    with transaction.atomic():
        config, _ = QuotaAlertSettings.objects.select_for_update().get_or_create(
            account=account
        )
        before, after = secret_set(config, moment)
        config.updated_at = moment
        config.save(
            update_fields=[
                "webhook_secret",
                "previous_webhook_secret",
                "previous_secret_expires_at",
                "updated_at",
            ]
        )
        audit_log_write(
            actor=actor,
            actor_label=actor_label,
            action=AuditAction.WEBHOOK_SECRET_ROTATED,
            account=account,
            object_type="quota_alert_settings",
            object_id=str(config.pk),
            object_name=f"webhook of {account.name}",
            changes={"secret_hint": (before or None, after)},
        )
    return config.webhook_secret


def webhook_enqueue(
    *,
    account: Account,
    url: str,
    event_type: str,
    data: Mapping[str, object],
    alert: QuotaAlert | None = None,
    now: datetime | None = None,
) -> WebhookDelivery:
    """Store one event for ``url``, due at once."""
    moment = now or timezone.now()
    event_id = f"evt_{uuid.uuid4().hex}"
    body = {
        "id": event_id,
        "type": event_type,
        "created": int(moment.timestamp()),
        "account": account.slug,
        "data": dict(data),
    }
    delivery = WebhookDelivery.objects.create(
        account=account,
        alert=alert,
        event_type=event_type,
        url=url,
        body=json.dumps(body, separators=(",", ":")),
        created_at=moment,
        next_attempt_at=moment,
    )
    return delivery


def webhook_attempt(
    *, delivery_id: uuid.UUID | str, now: datetime | None = None
) -> bool:
    """Make the next attempt of a due delivery; False when none was due (or another
    process holds it). A failure is logged and scheduled, never raised."""
    moment = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookStatus.PENDING, next_attempt_at__lte=moment
    ).update(
        next_attempt_at=moment + CLAIM,
        attempts=F("attempts") + 1,
        last_attempt_at=moment,
    )
    if not claimed:
        return False
    delivery = WebhookDelivery.objects.select_related("account__alert_settings").get(
        pk=delivery_id
    )
    body = delivery.body.encode()
    keys = signing_secrets(_settings_of(delivery.account), moment)
    if keys:
        header = signature_header(keys, int(moment.timestamp()), body)
        code, error = post(delivery.url, body, {SIGNATURE_HEADER: header})
    else:
        code, error = None, "no signing secret"
    _record(delivery, code, error, moment)
    return True


def _settings_of(account: Account) -> QuotaAlertSettings:
    try:
        return account.alert_settings
    except QuotaAlertSettings.DoesNotExist:
        return QuotaAlertSettings(account=account)


def post(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int | None, str]:
    """POST ``body`` as JSON; the status (None: no answer) and what went wrong, if any."""
    request = urllib.request.Request(
        url,
        data=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            **headers,
        },
        method="POST",
    )
    try:
        with public_opener.open(request, timeout=TIMEOUT_S) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code, f"HTTP {exc.code}"
    except urllib.error.URLError as exc:  # not connected to, refused, timed out
        if isinstance(exc.reason, NotConnected):
            return None, str(exc.reason)
        return None, type(exc.reason).__name__
    except (OSError, ValueError) as exc:  # refused, reset, timeout, bad URL
        return None, type(exc).__name__
    return status, "" if 200 <= status < 300 else f"HTTP {status}"


def _record(
    delivery: WebhookDelivery, code: int | None, error: str, now: datetime
) -> None:
    delivery.last_status_code = code
    delivery.last_error = error[:200]
    if not error:
        delivery.status = WebhookStatus.DELIVERED
        delivery.delivered_at = now
        delivery.next_attempt_at = None
        if delivery.alert_id is not None:
            QuotaAlert.objects.filter(pk=delivery.alert_id).update(webhook_sent_at=now)
    elif delivery.attempts >= MAX_ATTEMPTS:
        delivery.status = WebhookStatus.FAILED
        delivery.next_attempt_at = None
    else:
        delay = RETRY_DELAYS_S[delivery.attempts - 1]
        delivery.next_attempt_at = now + timedelta(seconds=delay)
    delivery.save(
        update_fields=[
            "status",
            "last_status_code",
            "last_error",
            "delivered_at",
            "next_attempt_at",
        ]
    )
    level = logging.INFO if not error else logging.WARNING
    logger.log(
        level,
        "webhook %s attempt %d: %s",
        delivery.pk,
        delivery.attempts,
        error or f"HTTP {code}",
    )


def webhook_deliver_due(*, now: datetime | None = None, batch: int = 100) -> int:
    """Attempt every pending delivery that is due (new, or its retry's wait over);
    return how many were tried."""
    moment = now or timezone.now()
    due = WebhookDelivery.objects.filter(
        status=WebhookStatus.PENDING, next_attempt_at__lte=moment
    ).order_by("next_attempt_at")
    ids = list(due.values_list("pk", flat=True)[:batch])
    return sum(webhook_attempt(delivery_id=pk, now=moment) for pk in ids)


def webhook_send_test(
    *, account: Account, now: datetime | None = None
) -> WebhookDelivery:
    """Queue a ``webhook.test`` event to the account's webhook; a ValidationError when it
    has none, or when its last test is less than ``TEST_INTERVAL`` old."""
    moment = now or timezone.now()
    config = _settings_of(account)
    if not config.webhook_url:
        raise ValidationError("Set a webhook URL first.")
    recent = WebhookDelivery.objects.filter(
        account=account, event_type=TEST_EVENT, created_at__gt=moment - TEST_INTERVAL
    )
    if recent.exists():
        wait = count(TEST_INTERVAL.total_seconds(), "second")
        raise ValidationError(f"One test event per {wait}: wait a moment.")
    return webhook_enqueue(
        account=account,
        url=config.webhook_url,
        event_type=TEST_EVENT,
        data={"message": "A test event from the veena gateway."},
        now=moment,
    )


def webhook_deliveries_purge(*, before: datetime) -> int:
    """Delete finished deliveries made before ``before``; a pending one stays."""
    deleted, _ = (
        WebhookDelivery.objects.filter(created_at__lt=before)
        .exclude(status=WebhookStatus.PENDING)
        .delete()
    )
    return deleted
