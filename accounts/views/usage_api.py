"""``GET /v1/organization/usage/audio_speeches`` and ``…/audio_transcriptions``.

Authenticated by an API key (``Authorization: Bearer``, ``X-API-Key``; the key's own
account) or by a dashboard session (``account=<slug>``, optional for someone with one
account; staff without it read every account). Another account is 403, never filtered.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounts.auth import authenticate_http
from accounts.exceptions import AdmissionDenied
from accounts.models.accounts import Account
from accounts.selectors import (
    Scope,
    dashboard_account_for,
    dashboard_accounts_for,
)
from accounts.selectors.freshness import AS_OF_HEADER, usage_complete_as_of
from accounts.selectors.openai_usage import (
    Kind,
    UsageApiError,
    parse_params,
    usage_page,
)

KEY_HEADERS = ("authorization", "x-api-key")


def _key_scope(request: HttpRequest) -> Scope:
    try:
        principal = authenticate_http(request, endpoint=None)
    except AdmissionDenied:
        raise UsageApiError("Incorrect API key provided.", status=401) from None
    account = Account.objects.get(pk=principal.account_id)
    slug = request.GET.get("account")
    if slug and slug != account.slug:
        raise UsageApiError("This key cannot read that account.", status=403)
    return Scope(account=account)


def _session_scope(request: HttpRequest) -> Scope:
    slug = request.GET.get("account")
    if slug:
        return Scope(account=dashboard_account_for(user=request.user, slug=slug))
    if request.user.is_staff:
        return Scope(account=None)
    accounts = list(dashboard_accounts_for(user=request.user)[:2])
    if len(accounts) != 1:
        raise UsageApiError(
            "Name the account: ?account=<slug>.", param="account", status=400
        )
    return Scope(account=accounts[0])


def usage_scope(request: HttpRequest) -> Scope:
    """Whose usage this request may read: the key's account, or the session's."""
    if any(request.headers.get(name) for name in KEY_HEADERS):
        return _key_scope(request)
    if request.user.is_authenticated:
        return _session_scope(request)
    raise UsageApiError("Missing API key or session.", status=401)


def _usage(request: HttpRequest, kind: Kind) -> JsonResponse:
    try:
        scope = usage_scope(request)
        params = parse_params(request.GET, now=timezone.now())
        page = usage_page(scope=scope, kind=kind, params=params)
    except UsageApiError as error:
        return JsonResponse(error.body(), status=error.status)
    except PermissionDenied:
        denied = UsageApiError("Not allowed for this account or key.", status=403)
        return JsonResponse(denied.body(), status=403)
    except Http404:
        return JsonResponse(UsageApiError("No such account.").body(), status=404)
    response = JsonResponse(page)
    as_of = usage_complete_as_of(now=timezone.now())
    if as_of is not None:  # every request that ended before this is counted (issue 30)
        response[AS_OF_HEADER] = as_of.isoformat()
    return response


@require_GET
def audio_speeches(request: HttpRequest) -> JsonResponse:
    """TTS usage: ``characters`` and ``num_model_requests`` per bucket."""
    return _usage(request, "audio_speeches")


@require_GET
def audio_transcriptions(request: HttpRequest) -> JsonResponse:
    """ASR usage (realtime and file): ``seconds`` of audio in, ``num_model_requests``."""
    return _usage(request, "audio_transcriptions")
