"""Signed, retried webhooks (issue 32): a local HTTP receiver checks every delivery with the
verification code published in docs/webhooks.md, in Python and in Node.js."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.parse
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models.alerts import QuotaAlertSettings
from accounts.models.audit import AuditLog
from accounts.models.choices import WebhookStatus
from accounts.models.webhooks import WebhookDelivery
from accounts.services.alerts import alert_settings_update
from accounts.services.public_http import (
    ADDRESS_NOT_ALLOWED,
    HOST_NOT_FOUND,
    NotConnected,
    public_addresses,
)
from accounts.services.webhooks import (
    MAX_ATTEMPTS,
    RETRY_DELAYS_S,
    SECRET_GRACE,
    signature_header,
    webhook_deliver_due,
    webhook_deliveries_purge,
    webhook_secret_rotate,
    webhook_send_test,
)
from accounts.tasks import deliver_webhook
from tests.conftest import ROOT
from tests.support.receiver import serving

pytestmark = pytest.mark.django_db
DOCS = ROOT / "docs" / "webhooks.md"


def snippet(name: str) -> str:
    """The code block that follows ``<!-- snippet: name -->`` in docs/webhooks.md."""
    text = DOCS.read_text()
    found = re.search(rf"<!-- snippet: {name} -->\n```\w+\n(.*?)```", text, re.S)
    assert found, f"docs/webhooks.md has no snippet {name}"
    return found.group(1)


def documented_python_verifier() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(snippet("verify-python"), str(DOCS), "exec"), namespace)  # noqa: S102
    return namespace["verify_veena_signature"]


class Receiver(BaseHTTPRequestHandler):
    """Answers with the next queued status; keeps each request's headers and raw body."""

    secret = ""
    statuses: list[int] = []
    received: list[dict[str, Any]] = []
    verify: Any = None

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        header = self.headers.get("Veena-Signature", "")
        valid = Receiver.verify(Receiver.secret, header, body)
        status = Receiver.statuses.pop(0) if Receiver.statuses else 204
        Receiver.received.append(
            {"header": header, "body": body, "valid": valid, "status": status}
        )
        self.send_response(status if valid else 400)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.statuses, Receiver.received = [], []
    Receiver.verify = documented_python_verifier()
    with serving(Receiver) as url:
        yield url


def send_test(account: Any) -> WebhookDelivery:
    """A test event, attempted at once by the task the "send test" buttons enqueue."""
    delivery = webhook_send_test(account=account)
    assert delivery is not None
    deliver_webhook(str(delivery.pk))
    delivery.refresh_from_db()
    return delivery


@pytest.fixture
def hooked(account, receiver) -> Any:
    """The account with its webhook at the receiver; the receiver knows the secret."""
    config, secret = alert_settings_update(
        account=account,
        actor=None,
        actor_label="t",
        fields={"webhook_url": receiver},
    )
    assert secret is not None and secret.startswith("whsec_")
    Receiver.secret = secret
    return config


def test_a_delivery_verifies_with_the_documented_python_code(hooked) -> None:
    delivery = send_test(hooked.account)
    delivery.refresh_from_db()
    assert delivery.status == WebhookStatus.DELIVERED
    assert delivery.last_status_code == 204
    (got,) = Receiver.received
    assert got["valid"] and re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", got["header"])
    event = json.loads(got["body"])
    assert event["type"] == "webhook.test" and event["account"] == "acme"
    assert event["id"] == json.loads(delivery.body)["id"]
    verify = documented_python_verifier()
    assert not verify(Receiver.secret, got["header"], got["body"] + b" ")
    tampered = got["body"].replace(b"webhook.test", b"webhook.tesT")
    assert not verify(Receiver.secret, got["header"], tampered)
    assert not verify("whsec_wrong", got["header"], got["body"])


def test_a_500_is_retried_after_the_backoff_with_the_same_event(hooked) -> None:
    Receiver.statuses = [500]
    delivery = send_test(hooked.account)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookStatus.PENDING, 1)
    assert (delivery.last_status_code, delivery.last_error) == (500, "HTTP 500")
    first_try = delivery.last_attempt_at
    assert delivery.next_attempt_at == first_try + timedelta(seconds=RETRY_DELAYS_S[0])
    # Not yet due: nothing is sent.
    assert webhook_deliver_due(now=first_try + timedelta(seconds=5)) == 0
    assert (
        webhook_deliver_due(now=first_try + timedelta(seconds=RETRY_DELAYS_S[0])) == 1
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookStatus.DELIVERED, 2)
    first, second = Receiver.received
    assert first["status"] == 500 and second["status"] == 204
    assert first["valid"] and second["valid"]
    assert first["body"] == second["body"]  # the same event, signed anew


def test_a_dead_receiver_is_given_up_after_the_last_attempt(account) -> None:
    config, _ = alert_settings_update(
        account=account,
        actor=None,
        actor_label="t",
        fields={"webhook_url": "http://127.0.0.1:9/nothing"},
    )
    delivery = send_test(config.account)
    moment = timezone.now()
    for delay in RETRY_DELAYS_S:
        moment += timedelta(seconds=delay)
        assert webhook_deliver_due(now=moment) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookStatus.FAILED, MAX_ATTEMPTS)
    assert delivery.last_status_code is None and delivery.last_error
    assert webhook_deliver_due(now=moment + timedelta(days=1)) == 0


def test_a_redirect_is_not_followed_and_fails_the_attempt(hooked) -> None:
    Receiver.statuses = [302]
    delivery = send_test(hooked.account)
    delivery.refresh_from_db()
    assert (
        delivery.status == WebhookStatus.PENDING and delivery.last_error == "HTTP 302"
    )
    assert len(Receiver.received) == 1


def test_rotation_signs_with_both_secrets_for_the_grace_period(hooked) -> None:
    old = Receiver.secret
    new = webhook_secret_rotate(account=hooked.account, actor=None, actor_label="t")
    assert new != old
    send_test(hooked.account)
    header, body = Receiver.received[-1]["header"], Receiver.received[-1]["body"]
    verify = documented_python_verifier()
    assert header.count("v1=") == 2
    assert verify(old, header, body) and verify(new, header, body)
    config = QuotaAlertSettings.objects.get(account=hooked.account)
    assert config.previous_secret_expires_at is not None
    later = config.previous_secret_expires_at + timedelta(seconds=1)
    assert later - timezone.now() <= SECRET_GRACE + timedelta(seconds=1)
    entry = AuditLog.objects.get(action="webhook.secret_rotated")
    hints = entry.changes["secret_hint"]
    assert old not in json.dumps(entry.changes) and new not in json.dumps(entry.changes)
    assert hints == [f"{old[:6]}\u2026{old[-4:]}", f"{new[:6]}\u2026{new[-4:]}"]


def test_the_documented_javascript_verifies_and_rejects_a_tampered_body(
    hooked, tmp_path: Path
) -> None:
    send_test(hooked.account)
    got = Receiver.received[-1]
    script = tmp_path / "verify.js"
    script.write_text(
        snippet("verify-javascript")
        + """
const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(cases.map((c) =>
  verifyVeenaSignature(c.secret, c.header, Buffer.from(c.body, "base64")))));
"""
    )
    import base64

    def case(secret: str, header: str, body: bytes) -> dict[str, str]:
        return {
            "secret": secret,
            "header": header,
            "body": base64.b64encode(body).decode(),
        }

    stale = signature_header([Receiver.secret], 1_000_000_000, got["body"])
    cases = [
        case(Receiver.secret, got["header"], got["body"]),
        case(Receiver.secret, got["header"], got["body"].replace(b"test", b"tost")),
        case("whsec_wrong", got["header"], got["body"]),
        case(Receiver.secret, stale, got["body"]),
        case(Receiver.secret, "garbage", got["body"]),
    ]
    result = subprocess.run(
        ["node", str(script)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(result.stdout) == [True, False, False, False, False]


def test_the_python_verifier_refuses_a_stale_or_malformed_header(hooked) -> None:
    verify = documented_python_verifier()
    body = b'{"id":"evt_1"}'
    now = int(timezone.now().timestamp())
    assert verify("s", signature_header(["s"], now, body), body)
    assert not verify("s", signature_header(["s"], now - 301, body), body)
    for header in ("", "t=abc,v1=00", "v1=00", f"t={now}", f"t={now},t={now},v1=00"):
        assert not verify("s", header, body)


@pytest.mark.django_db(transaction=True)
def test_dashboard_send_test_and_rotate_buttons(
    client, django_user_model, hooked
) -> None:
    """As in the embedded default: autocommit, so the first attempt runs in the request."""
    member = django_user_model.objects.create_user("m", "m@example.com", "pw")
    hooked.account.members.add(member)
    client.force_login(member)
    slug = hooked.account.slug
    Receiver.statuses = [500]
    test_url = reverse("dashboard:alerts_send_test", args=[slug])
    page = client.post(test_url, follow=True)
    text = page.content.decode()
    assert "Test event not delivered (HTTP 500)" in text and "10 seconds" in text
    assert 'data-status="pending"' in text
    page = client.post(test_url, follow=True)
    assert "One test event per 10 seconds: wait a moment." in page.content.decode()
    WebhookDelivery.objects.update(created_at=timezone.now() - timedelta(seconds=11))
    page = client.post(test_url, follow=True)
    assert "Test event delivered: HTTP 204." in page.content.decode()
    rotated = client.post(reverse("dashboard:alerts_rotate_secret", args=[slug]))
    assert rotated.status_code == 200 and rotated["Cache-Control"] == "no-store"
    secret = QuotaAlertSettings.objects.get(account=hooked.account).webhook_secret
    assert rotated.content.decode().count(secret) == 1
    again = client.get(reverse("dashboard:alerts", args=[slug])).content.decode()
    assert secret not in again and secret[-4:] in again
    assert WebhookDelivery.objects.filter(account=hooked.account).count() == 2


def test_a_webhook_may_not_reach_the_gateways_own_network(hooked, settings) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    delivery = send_test(hooked.account)
    assert delivery.last_error == "address not allowed" and Receiver.received == []
    for host in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "localhost"):
        with pytest.raises(NotConnected, match=ADDRESS_NOT_ALLOWED):
            public_addresses(host, 80)
    with pytest.raises(NotConnected, match=HOST_NOT_FOUND):
        public_addresses("no-such-host.invalid", 80)
    (found,) = public_addresses("93.184.216.34", 443)
    assert found[4] == ("93.184.216.34", 443)


def test_a_webhook_host_that_rebinds_to_the_gateways_network_is_not_reached(
    hooked, settings, monkeypatch
) -> None:
    """DNS rebinding: the name answers a public address first, then 127.0.0.1 (where the
    receiver listens). The delivery resolves it once, where it connects, and connects to
    what it checked, so the second answer never gets a request."""
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    port = urllib.parse.urlsplit(hooked.webhook_url).port
    hooked.webhook_url = f"http://rebind.test:{port}/hook"
    hooked.save(update_fields=["webhook_url"])
    public = "93.184.216.34"
    answers = iter([public])
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real_getaddrinfo(host, *args, **kwargs)
        ip = next(answers, "127.0.0.1")  # the rebound answer, from the second on
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    connected: list[Any] = []

    def connect(sock: socket.socket, address: Any) -> None:
        connected.append(address)
        if address[0] == public:  # this machine reaches no public host: refuse at once
            raise ConnectionRefusedError(address)
        real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket.socket, "connect", connect)
    delivery = send_test(hooked.account)
    assert Receiver.received == [] and connected == [(public, port)], (
        delivery.last_error
    )
    assert delivery.status == WebhookStatus.PENDING
    assert delivery.last_error == "ConnectionRefusedError"


def test_finished_deliveries_are_purged_after_the_retention(hooked) -> None:
    delivered = send_test(hooked.account)
    Receiver.statuses = [500]
    WebhookDelivery.objects.update(created_at=timezone.now() - timedelta(seconds=11))
    pending = send_test(hooked.account)
    later = timezone.now() + timedelta(seconds=1)
    assert webhook_deliveries_purge(before=later) == 1
    assert list(WebhookDelivery.objects.values_list("pk", flat=True)) == [pending.pk]
    assert delivered.status == WebhookStatus.DELIVERED
