"""What ``gateway.server.http_guard`` allows each HTTP route: its body size, and the 413 past it.

File uploads (``POST /v1/audio/transcriptions``) may carry ``OPENAI_TRANSCRIBE_MAX_BYTES`` and
the form around it; every other route Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB), far
above the largest JSON request (``TTS_MAX_TEXT_CHARS`` of text).
"""

from __future__ import annotations

import json

from django.conf import settings

from openai_rest.errors import OpenAiError
from openai_rest.transcription_request import FORM_OVERHEAD
from openai_rest.transcription_request import too_large as upload_too_large

UPLOAD_PATHS = ("/v1/audio/transcriptions",)


def body_limit(path: str) -> int:
    """The most bytes a request body on ``path`` may have."""
    if path in UPLOAD_PATHS:
        return int(settings.OPENAI_TRANSCRIBE_MAX_BYTES) + FORM_OVERHEAD
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440)


def too_large(path: str, limit: int) -> bytes:
    """The 413's body: OpenAI's error envelope (the upload's own message on its route)."""
    if path in UPLOAD_PATHS:
        error = upload_too_large()
    else:
        message = f"Request body exceeds the maximum size of {limit} bytes."
        error = OpenAiError(413, message, code="request_too_large")
    return json.dumps(error.body()).encode()
