"""What a TTS client secret's session pins: the voice, the format and its rate (issue 35).

``secret_pins`` validates a minting request's ``session`` with the request fields' own
rules; the start of each request on a socket the secret opened puts the pins in place of
the request's values (``tts.requests.pinned``). What is not pinned the request chooses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tts.protocol import TtsProtocolError, parse_rest_body
from tts.requests import resolve_voice
from tts.speakers import configured_engine

SESSION_TYPE = "tts"
SESSION_KEYS = ("type", "voice", "format", "sample_rate")


def _invalid(message: str) -> TtsProtocolError:
    return TtsProtocolError("VALIDATION_ERROR", message)


def secret_pins(session: Any) -> dict[str, Any]:
    """The validated pins of a TTS secret's ``session`` (``{}``: none); raises
    ``TtsProtocolError`` with the request fields' own messages."""
    if session is None:
        return {}
    if not isinstance(session, dict):
        raise _invalid("'session' must be an object")
    unknown = sorted(set(session) - set(SESSION_KEYS))
    if unknown:
        raise _invalid(f"Unknown parameter: 'session.{unknown[0][:64]}'")
    if session.get("type", SESSION_TYPE) != SESSION_TYPE:
        raise _invalid(f"'session.type' must be '{SESSION_TYPE}'")
    if session.get("sample_rate") is not None and session.get("format") is None:
        raise _invalid("'session.sample_rate' is pinned only with 'session.format'")
    fields = {"speaker": session.get("voice"), "format": session.get("format")}
    fields["sample_rate"] = session.get("sample_rate")
    req = parse_rest_body(json.dumps({"text": "pins", **fields}).encode())
    pins: dict[str, Any] = {}
    if fields["speaker"] is not None:
        pins["voice"] = resolve_voice(req, configured_engine())
    if fields["format"] is not None:
        pins.update(format=req.format, sample_rate=req.sample_rate)
    return pins


def session_echo(pins: Mapping[str, Any]) -> dict[str, Any]:
    """The response's ``session``: every pinnable field, null where not pinned."""
    return {"type": SESSION_TYPE} | {k: pins.get(k) for k in SESSION_KEYS[1:]}
