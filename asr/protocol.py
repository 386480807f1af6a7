"""Wire schema of ``/v1/realtime`` (docs/specs/realtime-asr.md): client and server events.

Supported: the OpenAI Realtime transcription-session subset in its GA shape
(``openai.types.realtime``) and its beta shape (``openai.types.beta.realtime``), and vLLM's
realtime dialect. Client events: ``session.update``, ``transcription_session.update`` (beta),
``input_audio_buffer.append`` / ``commit`` / ``clear`` (vLLM: no ``clear``, and ``commit`` may carry
``final``), each parsed once into its dialect's typed event (appends as decoded bytes), so no
handler sees a raw body. Server events are built here only, and every OpenAI-dialect event is validated
against the SDK's pydantic model before it is sent; the one deviation is ``format.rate`` 16000 or
48000 where the SDK pins 24000 (validated with 24000 substituted, realtime T-V1), and in beta
echoes ``client_secret`` (absent: sessions are not created over REST) and a served model name
that is not one of the SDK's literals. Never emitted: ``rate_limits.updated``, ``response.*``,
``…transcription.segment``, ``input_audio_buffer.timeout_triggered``.

Issue 9: frames are parsed by ``gateway.jsontext`` (not UTF-8, lone surrogates, nesting over
32, integer literals over 64 digits, ``NaN`` / ``Infinity``: ``invalid_payload``, vLLM
``invalid_json``); an ``event_id`` over ``MAX_EVENT_ID_CHARS`` is ``invalid_value`` and never
echoed.
"""

from __future__ import annotations

import copy
import enum
import secrets
import string
from typing import Any, ClassVar, Literal

import pybase64
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

from asr.errors import ERROR_TYPES, MESSAGES
from gateway import jsontext
from gateway.wording import count

_ALPHABET = string.ascii_letters + string.digits
MAX_EVENT_ID_CHARS = 512  # longer client event ids are refused, never echoed
SDK_RATE = 24_000  # openai-python's AudioPCM pins rate to 24000
BETA_MODELS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")


def new_id(prefix: str) -> str:
    """A random id such as ``event_Ab3cD4eF5gH6iJ7k`` (IT-1)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(16))


class RealtimeProtocolError(Exception):
    """A client event that cannot be applied: ``code``, fixed ``message`` and ``param``."""

    def __init__(
        self,
        code: str,
        message: str,
        param: str | None = None,
        event_id: str | None = None,
        selects: Dialect | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param
        self.event_id = event_id  # the client's, when the frame had a string one
        self.selects = selects  # the dialect the frame selected before it failed (DI-2)


# Client events (STYLE 14–15): parsed once, here, into the dialect's typed events.


class Dialect(enum.Enum):
    """Wire dialect of a connection (§4); fixed once determined."""

    UNDETERMINED = "auto"
    OPENAI = "openai"
    VLLM = "vllm"


class ClientEvent(BaseModel):
    """A parsed client event: its type, its string ``event_id`` and the dialect it selects
    while the connection's is undetermined (DI-2)."""

    model_config = ConfigDict(frozen=True)
    control: ClassVar[bool] = True  # costs a control budget token (appends do not)
    type: str
    event_id: str | None = None
    selects: Dialect | None = None


class SessionUpdate(ClientEvent):
    """GA ``session.update``; ``session`` is validated by ``asr.updates`` (SE-9 order)."""

    type: Literal["session.update"] = "session.update"
    session: Any = Field(default=None, repr=False)


class TranscriptionSessionUpdate(ClientEvent):
    """Beta ``transcription_session.update``."""

    type: Literal["transcription_session.update"] = "transcription_session.update"
    session: Any = Field(default=None, repr=False)


class VllmSessionUpdate(ClientEvent):
    """vLLM's flat ``session.update{model, language?, prompt?, include?}`` (VL-2)."""

    type: Literal["session.update"] = "session.update"
    model: Any = None
    language: Any = None
    prompt: Any = Field(default=None, repr=False)
    include: Any = None
    transcript: Any = None  # extension (issue 34): "final" or "deltas"


class AudioAppend(ClientEvent):
    """``input_audio_buffer.append``: the decoded audio bytes (AI-1 steps 2–4)."""

    control: ClassVar[bool] = False  # bounded by size instead
    type: Literal["input_audio_buffer.append"] = "input_audio_buffer.append"
    audio: bytes = Field(default=b"", repr=False)


class AudioCommit(ClientEvent):
    """``input_audio_buffer.commit`` (OpenAI dialect)."""

    type: Literal["input_audio_buffer.commit"] = "input_audio_buffer.commit"


class VllmCommit(ClientEvent):
    """vLLM's ``input_audio_buffer.commit``: ``final`` ends the item (VL-4, VL-5)."""

    type: Literal["input_audio_buffer.commit"] = "input_audio_buffer.commit"
    final: bool = False


class AudioClear(ClientEvent):
    """``input_audio_buffer.clear`` (OpenAI dialect only)."""

    type: Literal["input_audio_buffer.clear"] = "input_audio_buffer.clear"


Body = dict[str, Any]
OPENAI_EVENTS: dict[str, type[ClientEvent]] = {
    "session.update": SessionUpdate,
    "transcription_session.update": TranscriptionSessionUpdate,
    "input_audio_buffer.append": AudioAppend,
    "input_audio_buffer.commit": AudioCommit,
    "input_audio_buffer.clear": AudioClear,
}
VLLM_EVENTS: dict[str, type[ClientEvent]] = {
    "session.update": VllmSessionUpdate,
    "input_audio_buffer.append": AudioAppend,
    "input_audio_buffer.commit": VllmCommit,
}


def dialect_signal(kind: str, body: Body) -> Dialect | None:
    """The dialect an event of a known type selects while undetermined (DI-2), if any."""
    if kind == "session.update":
        if "session" in body:
            return Dialect.OPENAI
        return Dialect.VLLM if "model" in body else None
    if kind == "transcription_session.update":
        return Dialect.OPENAI
    if kind == "input_audio_buffer.commit" and "final" in body:
        return Dialect.VLLM
    if kind == "input_audio_buffer.append":
        audio = body.get("audio")
        return Dialect.OPENAI if isinstance(audio, str) and audio else None
    return None


def parse_client_event(
    text: str | None,
    data: bytes | None,
    *,
    dialect: Dialect = Dialect.UNDETERMINED,
    pcm16: bool = True,
) -> ClientEvent:
    """Parse one frame into the typed event of the dialect it is in (after its own DI-2
    signal); RealtimeProtocolError for anything else. ``pcm16``: appends must have whole samples.

    Blocking on large frames (JSON and base64): the consumer runs those off the loop (AR-2).
    """
    vllm = dialect is Dialect.VLLM
    body = _object(text, vllm)
    kind, event_id = body.get("type"), body.get("event_id")
    event_id = event_id if isinstance(event_id, str) else None
    if event_id is not None and len(event_id) > MAX_EVENT_ID_CHARS:
        code = "invalid_event" if vllm else "invalid_value"
        text = MESSAGES["event_id_too_long"].format(
            n=count(MAX_EVENT_ID_CHARS, "character")
        )
        raise RealtimeProtocolError(code, text, "event_id")
    if not isinstance(kind, str):
        code = "invalid_event" if vllm else "invalid_payload"
        raise RealtimeProtocolError(code, MESSAGES["no_type"], "type", event_id)
    if (VLLM_EVENTS if vllm else OPENAI_EVENTS).get(kind) is None:
        shown = kind if len(kind) <= 64 else kind[:61] + "..."
        message = (
            f"Unknown event type: {shown}"
            if vllm
            else f"Unknown event type: '{shown}'."
        )
        raise RealtimeProtocolError("unknown_event", message, None, event_id)
    selects = dialect_signal(kind, body) if dialect is Dialect.UNDETERMINED else None
    vllm = vllm or selects is Dialect.VLLM
    head: Body = {"event_id": event_id, "selects": selects}
    if kind == "input_audio_buffer.append":
        return AudioAppend(audio=_audio(body, pcm16, head), **head)
    if vllm and kind == "session.update":
        fields = ("model", "language", "prompt", "include", "transcript")
        return VllmSessionUpdate.model_validate(head | {k: body.get(k) for k in fields})
    if vllm and kind == "input_audio_buffer.commit":
        return VllmCommit(final=body.get("final") is True, **head)
    if kind == "session.update":
        return SessionUpdate(session=body.get("session"), **head)
    if kind == "transcription_session.update":
        return TranscriptionSessionUpdate(session=body.get("session"), **head)
    return OPENAI_EVENTS[kind](**head)


def _object(text: str | None, vllm: bool) -> Body:
    """The frame as a JSON object (issue 9: ``gateway.jsontext`` rules)."""
    if text is None:
        raise RealtimeProtocolError("invalid_payload", MESSAGES["binary_frame"])
    try:
        body = jsontext.loads(text)
    except jsontext.JsonError:
        if vllm:
            raise RealtimeProtocolError(
                "invalid_json", MESSAGES["invalid_json"]
            ) from None
        raise RealtimeProtocolError(
            "invalid_payload", MESSAGES["invalid_payload"]
        ) from None
    if not isinstance(body, dict):
        code = "invalid_event" if vllm else "invalid_payload"
        raise RealtimeProtocolError(code, MESSAGES["not_object"])
    return body


def _audio(body: Body, pcm16: bool, head: Body) -> bytes:
    """AI-1 steps 2–4: a base64 string, strictly decoded, of whole PCM16 samples."""
    audio = body.get("audio")
    event_id, selects = head["event_id"], head["selects"]
    if not isinstance(audio, str):
        text = MESSAGES["invalid_audio_value"]
        raise RealtimeProtocolError("invalid_value", text, "audio", event_id, selects)
    try:
        payload = pybase64.b64decode(audio, validate=True)
    except ValueError:
        text = MESSAGES["invalid_audio"]
        raise RealtimeProtocolError(
            "invalid_audio", text, "audio", event_id, selects
        ) from None
    if pcm16 and len(payload) % 2:
        text = MESSAGES["invalid_audio_format"]
        raise RealtimeProtocolError(
            "invalid_audio_format", text, "audio", event_id, selects
        )
    return payload


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
