"""The server events of ``/v1/realtime`` as the wire has them (docs/specs/realtime-asr.md §15).

Every OpenAI-dialect event is built here and validated against openai-python's pydantic model
before it is sent; the one deviation is ``format.rate`` 16000 or 48000 where the SDK pins 24000
(validated with 24000 substituted, realtime T-V1), and in beta echoes ``client_secret`` (absent:
sessions are not created over REST) and a served model name that is not one of the SDK's
literals. Never emitted: ``rate_limits.updated``, ``response.*``, ``…transcription.segment``,
``input_audio_buffer.timeout_triggered``. vLLM's dialect has exact models of its own (VL-1).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from openai.types.beta.realtime import (
    ConversationItemCreatedEvent as BetaItemCreated,
)
from openai.types.beta.realtime import (
    TranscriptionSessionUpdatedEvent as BetaSessionUpdated,
)
from openai.types.realtime import (
    ConversationItemAdded,
    ConversationItemDone,
    ConversationItemInputAudioTranscriptionCompletedEvent,
    ConversationItemInputAudioTranscriptionDeltaEvent,
    ConversationItemInputAudioTranscriptionFailedEvent,
    InputAudioBufferClearedEvent,
    InputAudioBufferCommittedEvent,
    InputAudioBufferSpeechStartedEvent,
    InputAudioBufferSpeechStoppedEvent,
    RealtimeErrorEvent,
    SessionCreatedEvent,
    SessionUpdatedEvent,
)
from pydantic import BaseModel, ConfigDict, Field

from asr.errors import ERROR_TYPES
from asr.protocol import new_id

SDK_RATE = 24_000  # openai-python's AudioPCM pins rate to 24000
BETA_MODELS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")

# Server events: the OpenAI dialect's table, validated against openai-python.

SERVER_EVENTS: dict[str, type[BaseModel]] = {
    "session.created": SessionCreatedEvent,
    "session.updated": SessionUpdatedEvent,
    "input_audio_buffer.committed": InputAudioBufferCommittedEvent,
    "input_audio_buffer.cleared": InputAudioBufferClearedEvent,
    "input_audio_buffer.speech_started": InputAudioBufferSpeechStartedEvent,
    "input_audio_buffer.speech_stopped": InputAudioBufferSpeechStoppedEvent,
    "conversation.item.added": ConversationItemAdded,
    "conversation.item.done": ConversationItemDone,
    "conversation.item.input_audio_transcription.delta": ConversationItemInputAudioTranscriptionDeltaEvent,
    "conversation.item.input_audio_transcription.completed": ConversationItemInputAudioTranscriptionCompletedEvent,
    "conversation.item.input_audio_transcription.failed": ConversationItemInputAudioTranscriptionFailedEvent,
    "error": RealtimeErrorEvent,
}
BETA_EVENTS: dict[str, type[BaseModel]] = {
    "conversation.item.created": BetaItemCreated,
    "transcription_session.updated": BetaSessionUpdated,
}


def sdk_view(event: dict[str, Any]) -> dict[str, Any]:
    """The event as openai-python can validate it: the documented deviations replaced."""
    view = copy.deepcopy(event)
    session = view.get("session")
    if isinstance(session, dict):
        fmt = (session.get("audio") or {}).get("input", {}).get("format") or {}
        if fmt.get("rate") not in (None, SDK_RATE):
            fmt["rate"] = SDK_RATE
        if view["type"] == "transcription_session.updated":
            session.setdefault("client_secret", {"value": "", "expires_at": 0})
            transcription = session.get("input_audio_transcription") or {}
            if transcription.get("model") not in (None, *BETA_MODELS):
                transcription["model"] = BETA_MODELS[0]
    return view


def server_event(kind: str, **fields: Any) -> dict[str, Any]:
    """An OpenAI-dialect server event with a fresh ``event_id``, checked against the SDK."""
    event = {"type": kind, "event_id": new_id("event_"), **fields}
    model = SERVER_EVENTS.get(kind) or BETA_EVENTS[kind]
    model.model_validate(sdk_view(event))
    return event


def user_item(item_id: str, transcript: str | None) -> dict[str, Any]:
    """The conversation item of a committed input-audio item (IT-3)."""
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": transcript}],
    }


def error_event(
    code: str,
    message: str,
    *,
    param: str | None = None,
    client_event_id: str | None = None,
    retry_after_ms: int | None = None,
) -> dict[str, Any]:
    """The OpenAI error envelope (ER-1), with the retry hint of AU-5 when given."""
    error: dict[str, Any] = {
        "type": ERROR_TYPES.get(code, "invalid_request_error"),
        "code": code,
        "message": message,
        "param": param,
        "event_id": client_event_id,
    }
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
    return server_event("error", error=error)


# vLLM dialect (VL-1): exact keys, no event_id.


class VllmEvent(BaseModel):
    """Base of vLLM server events: no extra keys."""

    model_config = ConfigDict(extra="forbid")


class VllmSessionUpdated(VllmEvent):
    """The model is validated (VL-2)."""

    type: Literal["session.updated"] = "session.updated"
    model: str


class VllmDelta(VllmEvent):
    """Confirmed text (VL-6)."""

    type: Literal["transcription.delta"] = "transcription.delta"
    delta: str = Field(min_length=1)
    logprobs: list[dict[str, Any]] | None = None


class VllmUsage(VllmEvent):
    """Token usage of an item (VL-7)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: None = None


class VllmDone(VllmEvent):
    """The item's full text (VL-7)."""

    type: Literal["transcription.done"] = "transcription.done"
    text: str
    usage: VllmUsage


class VllmError(VllmEvent):
    """The flat error envelope (VL-1)."""

    type: Literal["error"] = "error"
    error: str
    code: str


def vllm_done(text: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """``transcription.done`` with its usage."""
    usage = VllmUsage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    return VllmDone(text=text, usage=usage).model_dump()


def vllm_error(code: str, message: str) -> dict[str, Any]:
    """The flat vLLM error."""
    return VllmError(error=message, code=code).model_dump()
