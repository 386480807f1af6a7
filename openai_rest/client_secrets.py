"""``POST /v1/realtime/client_secrets``: OpenAI's GA client secrets, for ``/v1/realtime``.

The body is ``{"expires_after": {"anchor": "created_at", "seconds": 10–7200},
"session": {"type": "transcription", …}}``, both optional (600 s; the default session), as
the SDKs' ``client.realtime.client_secrets.create(...)`` sends it. The session is checked
as a GA ``session.update`` would be (``asr.updates``); a ``realtime`` (conversation)
session is refused, this server transcribes only. The answer is ``{"value": "ek_…",
"expires_at", "session"}``: the secret opens ``/v1/realtime`` with that session already
applied until ``expires_at``, metered to the minting key (``accounts.auth``).
"""

from __future__ import annotations

import uuid

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.exceptions import AdmissionDenied, InvalidExpiry
from accounts.minting import authenticate_minter, mint_client_secret, minted_response
from asr.config import ConfigError, session_object
from asr.connection import secret_config
from gateway.logs import request_id_of
from openai_rest.errors import (
    OpenAiError,
    denial_error,
    error_response,
    invalid,
    json_object,
)

# A session object is a few hundred bytes; its prompt is capped by ASR_MAX_PROMPT_CHARS.
MAX_BODY_BYTES = 64 * 1024


@csrf_exempt
@require_POST
def realtime_client_secrets(request: HttpRequest) -> JsonResponse:
    """Mint a realtime client secret from the request's API key."""
    request_id = request_id_of(request)
    try:
        principal = authenticate_minter(request, use="realtime")
        data = json_object(request.body or b"{}", max_bytes=MAX_BODY_BYTES)
        session = data.get("session")
        config = secret_config(session)
        minted = mint_client_secret(
            principal=principal,
            use="realtime",
            expires_after=data.get("expires_after"),
            session=session,
        )
    except AdmissionDenied as denied:
        return error_response(denial_error(denied), request_id)
    except OpenAiError as error:
        return error_response(error, request_id)
    except (InvalidExpiry, ConfigError) as bad:
        return error_response(invalid(bad.message, param=bad.param), request_id)
    echo = session_object(
        config,
        session_id="sess_" + uuid.uuid4().hex,
        expires_at=minted.expires_at_seconds,
    )
    return minted_response(minted, echo)
