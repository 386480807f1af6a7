"""The browser playground (``/playground/``): hear and talk to the APIs without code.

The page is a Django template with our own static scripts. It holds no API key: it asks
``client-secret/`` (a CSRF-protected POST for the signed-in member) for a client secret
of one use (``tts`` or ``realtime``, ``accounts.client_secrets``), bound to the member and
the page's origin, and offers it to that socket as the browser subprotocol
``veena-api-key.<secret>`` / ``openai-insecure-api-key.<secret>``. The voices come with
the page. Everything it does goes through the public endpoints, metered to the account's
playground key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from accounts.models.accounts import Account
from accounts.models.choices import QuotaMetric, SecretUse
from accounts.origins import normalize_origin
from accounts.selectors import playground_account_for, playground_accounts_for
from accounts.selectors.quota import quota_bars
from accounts.services.playground import playground_secret_mint

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TEMPLATES = "accounts/playground/"
# The microphone is sent as PCM16 at the Realtime protocol's default rate (realtime SE-2).
CAPTURE_RATE = 24_000
# The TTS engine's voices, formats and rates as ``GET /v1/tts/speakers`` lists them.
VoicesSource = Callable[[], dict[str, Any]]


@login_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """The account picker, or straight to the playground of a member's only account."""
    accounts = list(playground_accounts_for(user=request.user))
    if len(accounts) == 1:
        return redirect("playground:page", slug=accounts[0].slug)
    return render(request, TEMPLATES + "index.html", {"accounts": accounts})


@login_required
@require_GET
def page(request: HttpRequest, slug: str, *, voices: VoicesSource) -> HttpResponse:
    """The playground of one account: text to speech and speech to text."""
    account = playground_account_for(user=request.user, slug=slug)
    config = {
        "secretUrl": reverse("playground:client_secret", kwargs={"slug": account.slug}),
        "voices": voices(),
        "ttsPath": "/v1/tts/ws",
        "realtimePath": "/v1/realtime",
        "captureRate": CAPTURE_RATE,
        "workletUrl": static("accounts/playground/capture-worklet.js"),
        "maxTextChars": settings.TTS_MAX_TEXT_CHARS,
        "quotaUrl": reverse("playground:quota", kwargs={"slug": account.slug}),
        "ttsCharacters": tts_characters(account),
    }
    context = {"account": account, "config": config}
    return render(request, TEMPLATES + "page.html", context)


def tts_characters(account: Account) -> dict[str, int] | None:
    """This month's TTS characters of the account: used, limit and left (None: no limit)."""
    for bar in quota_bars(account=account, now=timezone.now()):
        if bar.metric == QuotaMetric.TTS_CHARACTERS:
            left = max(0, bar.limit - bar.used)
            return {"used": bar.used, "limit": bar.limit, "left": left}
    return None


@login_required
@require_GET
def quota(request: HttpRequest, slug: str) -> JsonResponse:
    """``quota/``: the characters left this month, shown beside the text (never cached)."""
    account = playground_account_for(user=request.user, slug=slug)
    response = JsonResponse({"tts_characters": tts_characters(account)})
    add_never_cache_headers(response)
    return response


@login_required
@require_POST
def client_secret(request: HttpRequest, slug: str) -> HttpResponse:
    """``client-secret/``: a new secret of ``use`` for this member, account and page
    origin; never cached or logged."""
    account = playground_account_for(user=request.user, slug=slug)
    use = request.POST.get("use", "")
    if use not in SecretUse.values:
        return JsonResponse({"error": "use must be tts or realtime."}, status=400)
    # get_host() is checked against ALLOWED_HOSTS, so this is the page's own origin.
    origin = normalize_origin(f"{request.scheme}://{request.get_host()}")
    if origin is None:  # e.g. a host name with "_": no browser sends it as an Origin
        return JsonResponse(
            {"error": "This host name is not a web origin."}, status=400
        )
    minted = playground_secret_mint(
        account=account,
        user=cast("User", request.user),
        origin=origin,
        use=SecretUse(use),
    )
    ttl = settings.PLAYGROUND_TOKEN_TTL_SECONDS
    response = JsonResponse(
        {"value": minted.value, "expires_at": minted.expires_at_seconds, "ttl": ttl}
    )
    add_never_cache_headers(response)
    return response
