"""The gateway's REST endpoints as an OpenAPI 3.1 document (``/v1/openapi.json``).

The WebSocket endpoints (``/v1/tts/ws``, ``/v1/realtime``) are outside OpenAPI's reach; their
references are docs/tts-protocol.md and docs/realtime-protocol.md. Built per request from this
process's settings, so limits and caps are the served ones.
"""

from __future__ import annotations

from typing import Any

from veena_site.openapi.client_secrets import secret_paths, secret_schemas
from veena_site.openapi.events import event_schemas
from veena_site.openapi.paths import paths
from veena_site.openapi.schemas import components
from veena_site.openapi.transcriptions import transcription_schemas

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1"


def openapi_document() -> dict[str, Any]:
    """The whole document."""
    parts = components()
    parts["schemas"] |= transcription_schemas() | event_schemas() | secret_schemas()
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "veena speech gateway",
            "version": API_VERSION,
            "summary": "Streaming TTS and realtime ASR behind API keys, plans and quotas.",
            "description": (
                "REST endpoints of the gateway. The WebSocket APIs are documented at "
                "/docs/tts-protocol/ and /docs/realtime-protocol/; this document is "
                "linked from /docs/rest/."
            ),
            "license": {"name": "GPL-3.0-or-later", "identifier": "GPL-3.0-or-later"},
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {"apiKeyHeader": []}],
        "tags": [
            {"name": "OpenAI", "description": "OpenAI-compatible audio endpoints."},
            {"name": "veena", "description": "The TTS protocol's REST endpoints."},
            {"name": "Usage", "description": "Usage in OpenAI's Usage API shape."},
            {"name": "Operations", "description": "Probes (no key)."},
        ],
        "paths": paths() | secret_paths(),
        "components": parts,
    }
