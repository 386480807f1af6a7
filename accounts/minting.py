"""Minting client secrets: the one way the apps reach it (issue 35; accounts L2).

``authenticate_minter`` authenticates a minting request's API key for the endpoint the
secret will open (the key must be allowed there), ``mint_client_secret`` mints one from
it; the apps validate the ``session`` (its schema is theirs) in between, and answer with
``minted_response``.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, JsonResponse
from django.utils.cache import add_never_cache_headers

from accounts.admission import KeyPrincipal, authenticate_request
from accounts.client_secrets import ttl_seconds
from accounts.models.choices import Endpoint, SecretUse
from accounts.services.client_secrets import MintedSecret, client_secret_create

Use = Literal["realtime", "tts"]
_ENDPOINTS: dict[Use, Endpoint] = {"realtime": Endpoint.ASR, "tts": Endpoint.TTS}


def authenticate_minter(request: HttpRequest, *, use: Use) -> KeyPrincipal:
    """The request's key, allowed on the endpoint of ``use``; raises AdmissionDenied."""
    return authenticate_request(request, endpoint=_ENDPOINTS[use])


def mint_client_secret(
    *,
    principal: KeyPrincipal,
    use: Use,
    expires_after: Any,
    session: dict[str, Any] | None,
) -> MintedSecret:
    """A new secret of ``use`` from ``principal``'s key, living as OpenAI's
    ``expires_after`` asks; raises ``InvalidExpiry``."""
    return client_secret_create(
        api_key_id=principal.key_id,
        use=SecretUse(use),
        ttl_seconds=ttl_seconds(expires_after),
        session=session,
    )


def minted_response(minted: MintedSecret, session: dict[str, Any]) -> JsonResponse:
    """OpenAI's answer to a minted secret, ``{"value", "expires_at", "session"}`` with the
    app's echo of its session, never cached (the value is shown once)."""
    response = JsonResponse(
        {
            "value": minted.value,
            "expires_at": minted.expires_at_seconds,
            "session": session,
        }
    )
    add_never_cache_headers(response)
    return response
