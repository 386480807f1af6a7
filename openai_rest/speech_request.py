"""The body of ``POST /v1/audio/speech``, validated, and its TTS request.

Fields: ``model``, ``input``, ``voice`` (a name, or ``{"id": name}``), ``response_format``
(default ``mp3``), ``speed`` (0.25–4.0, clamped to the engine's 0.5–2.0), ``instructions``
(accepted and ignored: no engine here takes style prompts) and ``stream_format`` (``audio``
or ``sse``). Unknown fields are ignored, as OpenAI does for forward compatibility. Our
extension ``word_timestamps`` (issue 35, with ``stream_format: "sse"`` only) adds a
``speech.audio.words`` event before the audio its words start in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings

from gateway.wording import count
from openai_rest.catalog import speaker_for, tts_models
from openai_rest.encode import RESPONSE_FORMATS, ResponseFormat
from openai_rest.errors import invalid, json_object
from tts.protocol import TtsProtocolError, TtsRequest, parse_rest_body

SPEECH_RATE = 24_000  # OpenAI's pcm is 24 kHz s16le; every format is made at this rate
ENGINE_SPEED = (0.5, 2.0)


@dataclass(frozen=True)
class SpeechRequest:
    """A validated speech request."""

    model: str
    input: str = field(repr=False)
    voice: str
    response_format: ResponseFormat
    speed: float
    stream_format: Literal["audio", "sse"]
    word_timestamps: bool = False


def parse_speech(body: bytes) -> SpeechRequest:
    """Validate the JSON body; raise ``OpenAiError`` (400, 413)."""
    data = json_object(body, max_bytes=settings.TTS_MAX_MESSAGE_BYTES)
    return SpeechRequest(
        model=_model(data),
        input=_input(data),
        voice=_voice(data),
        response_format=_format(data),
        speed=_speed(data),
        stream_format=_stream_format(data),
        word_timestamps=_word_timestamps(data),
    )


def tts_request(req: SpeechRequest) -> TtsRequest:
    """The socket's request for it, validated by the same parser (PCM at 24 kHz)."""
    low, high = ENGINE_SPEED
    message = {
        "text": req.input,
        "speaker": speaker_for(req.voice),
        "format": "pcm",
        "sample_rate": SPEECH_RATE,
        "speed": min(high, max(low, req.speed)),
        "word_timestamps": req.word_timestamps,
    }
    try:
        return parse_rest_body(json.dumps(message).encode())
    except TtsProtocolError as exc:
        raise invalid(exc.message, param=_param_of(exc.message)) from None


def _param_of(message: str) -> str | None:
    for ours, theirs in (("text", "input"), ("speaker", "voice"), ("speed", "speed")):
        if f"'{ours}'" in message:
            return theirs
    return None


def _required_string(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None:
        raise invalid(f"Missing required parameter: '{name}'.", param=name)
    if not isinstance(value, str):
        raise invalid(f"Invalid type for '{name}': expected a string.", param=name)
    return value


def _model(data: dict[str, Any]) -> str:
    model = _required_string(data, "model")
    names = [m.id for m in tts_models()]
    if model not in names:
        raise invalid(
            f"Invalid model '{model[:64]}'. Models: {', '.join(names)}.",
            param="model",
            code="model_not_found",
        )
    return model


def _input(data: dict[str, Any]) -> str:
    text = _required_string(data, "input")
    cap = settings.OPENAI_SPEECH_MAX_INPUT_CHARS
    if len(text) > cap:
        raise invalid(
            f"'input' is longer than {count(cap, 'character')}.",
            param="input",
            code="string_above_max_length",
        )
    if not text.strip():
        raise invalid("'input' is empty.", param="input")
    return text


def _voice(data: dict[str, Any]) -> str:
    voice = data.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    if not isinstance(voice, str) or not voice.strip():
        raise invalid("Missing required parameter: 'voice'.", param="voice")
    return voice


def _format(data: dict[str, Any]) -> ResponseFormat:
    fmt = data.get("response_format")
    if fmt is None:
        return "mp3"
    for known in RESPONSE_FORMATS:
        if fmt == known:
            return known
    raise invalid(
        f"Unsupported response_format '{str(fmt)[:32]}'. "
        f"Supported: {', '.join(RESPONSE_FORMATS)}.",
        param="response_format",
        code="invalid_value",
    )


def _speed(data: dict[str, Any]) -> float:
    speed = data.get("speed", 1.0)
    if speed is None:
        return 1.0
    if isinstance(speed, bool) or not isinstance(speed, int | float):
        raise invalid("'speed' must be a number.", param="speed")
    if not 0.25 <= speed <= 4.0:
        raise invalid("'speed' must be between 0.25 and 4.0.", param="speed")
    return float(speed)


def _stream_format(data: dict[str, Any]) -> Literal["audio", "sse"]:
    value = data.get("stream_format")
    if value is None or value == "audio":
        return "audio"
    if value == "sse":
        return "sse"
    raise invalid(
        "'stream_format' must be 'audio' or 'sse'.",
        param="stream_format",
        code="invalid_value",
    )


def _word_timestamps(data: dict[str, Any]) -> bool:
    value = data.get("word_timestamps")
    if value is None or value is False:
        return False
    if value is not True:
        raise invalid("'word_timestamps' must be a boolean.", param="word_timestamps")
    if data.get("stream_format") != "sse":
        raise invalid(
            "'word_timestamps' needs 'stream_format': 'sse'.", param="word_timestamps"
        )
    return True
