"""The playground's pages and its client-secret endpoint: who may mint, how, and what a
mint makes (issue 35: client secrets, one per use, bound to the member and the page)."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.keys import hash_key
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.audit import AuditLog
from accounts.models.choices import KeyKind
from accounts.models.client_secrets import ClientSecret
from accounts.services.accounts import account_get_or_create, plan_get_or_create_default
from accounts.services.api_keys import api_key_create

pytestmark = pytest.mark.django_db

URL = "/playground/acme/client-secret/"


def minted(client: Client, use: str = "tts") -> ClientSecret:
    """Mint through the page's endpoint; the row its value names."""
    value = client.post(URL, {"use": use}).json()["value"]
    return ClientSecret.objects.get(secret_hash=hash_key(value))


def member_of(*slugs: str, staff: bool = False) -> tuple[User, list[Account]]:
    user = User.objects.create_user(f"u{User.objects.count()}", is_staff=staff)
    accounts = []
    for slug in slugs:
        account = Account.objects.filter(slug=slug).first() or account_get_or_create(
            name=slug, plan=plan_get_or_create_default()
        )
        account.members.add(user)
        accounts.append(account)
    return user, accounts


def signed_in(user: User, **kwargs: bool) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def test_minting_needs_a_signed_in_post_with_csrf() -> None:
    user, _ = member_of("acme")
    assert Client().post(URL, {"use": "tts"}).status_code == 302  # to the sign-in page
    assert signed_in(user).get(URL).status_code == 405
    strict = signed_in(user, enforce_csrf_checks=True)
    assert strict.post(URL, {"use": "tts"}).status_code == 403
    page = strict.get("/playground/acme/")
    csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert csrf is not None
    token = csrf[1].decode()
    assert strict.post(URL, {"use": "tts"}, HTTP_X_CSRFTOKEN=token).status_code == 200
    assert strict.post(URL, {"use": "usage"}, HTTP_X_CSRFTOKEN=token).status_code == 400


def test_a_mint_is_a_short_lived_uncached_secret_of_one_use_on_one_playground_key(
    settings: object,
) -> None:
    settings.PLAYGROUND_TOKEN_TTL_SECONDS = 42  # type: ignore[attr-defined]
    user, (account,) = member_of("acme")
    client = signed_in(user)
    first = client.post(URL, {"use": "realtime"})
    assert first.status_code == 200 and "no-store" in first["Cache-Control"]
    body = first.json()
    assert body["ttl"] == 42 and body["value"].startswith("ek_")
    assert body["expires_at"] == pytest.approx(time.time() + 42, abs=2)
    row = ClientSecret.objects.get(secret_hash=hash_key(body["value"]))
    assert (row.use, row.origin, row.created_by) == (
        "realtime",
        "http://testserver",
        user,
    )
    second = minted(client)
    assert second.use == "tts" and second.pk != row.pk
    (key,) = ApiKey.objects.filter(account=account, kind=KeyKind.PLAYGROUND)
    assert key.display == "playground" and row.api_key == key == second.api_key
    audit = AuditLog.objects.get(object_id=str(key.id))
    assert (audit.action, audit.actor) == ("key.created", user)


def test_a_revoked_playground_key_is_replaced_at_the_next_mint() -> None:
    from accounts.services.api_keys import api_key_revoke

    user, (account,) = member_of("acme")
    client = signed_in(user)
    old = minted(client)
    api_key_revoke(api_key=old.api_key, actor=user, reason="x")
    assert minted(client).api_key_id != old.api_key_id


def test_only_members_reach_an_accounts_playground() -> None:
    member, _ = member_of("acme")
    outsider, _ = member_of("other")
    staff, _ = member_of(staff=True)  # sees every dashboard, spends no one's quota
    for user in (outsider, staff):
        client = signed_in(user)
        assert client.get("/playground/acme/").status_code == 403
        assert client.post(URL, {"use": "tts"}).status_code == 403
    assert signed_in(member).get("/playground/nope/").status_code == 403
    Account.objects.filter(slug="acme").update(is_active=False)
    assert signed_in(member).post(URL, {"use": "tts"}).status_code == 403


def test_the_index_sends_a_member_to_their_account_or_lets_them_pick() -> None:
    one, _ = member_of("acme")
    response = signed_in(one).get("/playground/")
    assert response.status_code == 302 and response["Location"] == "/playground/acme/"
    two, _ = member_of("acme", "beta")
    page = signed_in(two).get("/playground/").content.decode()
    assert "/playground/acme/" in page and "/playground/beta/" in page
    nobody = User.objects.create_user("nobody")
    assert "not a member" in signed_in(nobody).get("/playground/").content.decode()


def test_the_page_carries_its_config_and_no_key() -> None:
    user, (account,) = member_of("acme")
    _, raw = api_key_create(account=account, name="prod", actor=None, actor_label="t")
    html = signed_in(user).get("/playground/acme/").content.decode()
    config = json.loads(
        re.search(
            r'id="playground-config" type="application/json">(.*?)</script>', html
        )[1]  # type: ignore[index]
    )
    assert config["secretUrl"] == URL and config["captureRate"] == 24000
    # The voices come with the page, as GET /v1/tts/speakers lists them.
    assert [s["id"] for s in config["voices"]["speakers"]] == ["tone"]
    assert raw not in html and "vk_" not in html and "ek_" not in html
    assert "<script>" not in html  # no inline script: modules from our static files


def test_the_keys_page_offers_only_revoking_the_playground_key() -> None:
    user, (account,) = member_of("acme")
    client = signed_in(user)
    minted(client)
    key = ApiKey.objects.get(account=account, kind=KeyKind.PLAYGROUND)
    page = client.get("/dashboard/acme/keys/").content.decode()
    row = re.search(rf'<tr data-key="{key.id}".*?</tr>', page, re.S)[0]  # type: ignore[index]
    assert "Revoke secrets" in row and "Edit" not in row and "playground" in row
    edit = client.post(f"/dashboard/acme/keys/{key.id}/", {"name": "renamed"})
    assert edit.status_code == 400
    key.refresh_from_db()
    assert key.name != "renamed" and key.version == 1


def test_the_characters_left_this_month_come_from_the_quota_counter() -> None:
    from django.utils import timezone

    from accounts.models.plans import Plan
    from accounts.models.quota import QuotaCounter
    from accounts.services.quota import period_of

    user, (account,) = member_of("acme")
    assert account.plan.monthly_tts_characters is None
    response = signed_in(user).get("/playground/acme/quota/")
    assert response.json() == {"tts_characters": None}  # no monthly limit
    assert "no-cache" in response["Cache-Control"]
    account.plan = Plan.objects.create(
        name="small",
        requests_per_minute=60,
        max_concurrent_streams=2,
        max_session_seconds=600,
        monthly_tts_characters=1000,
    )
    account.save(update_fields=["plan"])
    QuotaCounter.objects.create(
        account=account,
        period=period_of(timezone.now()),
        metric="tts_characters",
        used=1200,  # a reservation may overshoot: nothing is left, never less
    )
    left = {"used": 1200, "limit": 1000, "left": 0}
    assert signed_in(user).get("/playground/acme/quota/").json() == {
        "tts_characters": left
    }
    html = signed_in(user).get("/playground/acme/").content.decode()
    assert '"ttsCharacters": {"used": 1200, "limit": 1000, "left": 0}' in html
    outsider, _ = member_of("other")
    assert signed_in(outsider).get("/playground/acme/quota/").status_code == 403
