"""``POST /v1/tts/client_secrets``: client secrets for ``/v1/tts/ws`` (issue 35).

The shape of OpenAI's realtime client secrets: ``{"expires_after": {"anchor": "created_at",
"seconds": 10–7200}, "session": {"type": "tts", "voice"?, "format"?, "sample_rate"?}}``,
both optional, answered by ``{"value": "ek_…", "expires_at", "session"}``. The session pins
what every request on a socket the secret opens uses (``tts.pins``): ``voice`` (a voice id
or alias, resolved as a request's ``speaker``), ``format`` with its ``sample_rate`` (the
format's default when absent). Errors use the ``POST /v1/tts`` envelope (H4).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.exceptions import AdmissionDenied, InvalidExpiry
from accounts.minting import authenticate_minter, mint_client_secret, minted_response
from gateway.logs import request_id_of
from tts.pins import secret_pins, session_echo
from tts.protocol import TtsProtocolError
from tts.views import RestError, error_response, rest_denial

MAX_BODY_BYTES = 16 * 1024


def _body(request: HttpRequest) -> dict[str, Any]:
    if len(request.body) > MAX_BODY_BYTES:
        raise RestError("VALIDATION_ERROR", "Message too large", status=413)
    if not request.body.strip():
        return {}
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        raise RestError("INVALID_JSON", "Invalid JSON body") from None
    if not isinstance(data, dict):
        raise RestError("VALIDATION_ERROR", "Request must be a JSON object")
    return data


@csrf_exempt
@require_POST
def create(request: HttpRequest) -> HttpResponseBase:
    """Mint a TTS client secret from the request's API key."""
    request_id = request_id_of(request)
    try:
        if not settings.TTS_AUTH_REQUIRED:  # no key to mint from, nothing to open
            raise RestError("AUTH_FAILED", "Client secrets need TTS_AUTH_REQUIRED")
        principal = authenticate_minter(request, use="tts")
        data = _body(request)
        pins = secret_pins(data.get("session"))
        minted = mint_client_secret(
            principal=principal,
            use="tts",
            expires_after=data.get("expires_after"),
            session=pins,
        )
    except AdmissionDenied as denied:
        return error_response(rest_denial(denied), request_id)
    except RestError as error:
        return error_response(error, request_id)
    except InvalidExpiry as bad:
        return error_response(RestError("VALIDATION_ERROR", bad.message), request_id)
    except TtsProtocolError as bad:
        return error_response(RestError(bad.code, bad.message), request_id)
    return minted_response(minted, session_echo(pins))
