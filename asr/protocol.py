"""Wire schema of ``/v1/realtime`` (docs/specs/realtime-asr.md): client and server events.

Supported: the OpenAI Realtime transcription-session subset in its GA shape
(``openai.types.realtime``) and its beta shape (``openai.types.beta.realtime``), and vLLM's
realtime dialect. Client events: ``session.update``, ``transcription_session.update`` (beta),
``input_audio_buffer.append`` / ``commit`` / ``clear`` (vLLM: no ``clear``, and ``commit`` may carry
``final``), each parsed once into its dialect's typed event (appends as decoded bytes), so no
handler sees a raw body. Server events are built only by ``asr.event_schema``, which validates
every OpenAI-dialect event against the SDK before it is sent.

Issue 9: frames are parsed by ``gateway.jsontext`` (not UTF-8, lone surrogates, nesting over
32, integer literals over 64 digits, ``NaN`` / ``Infinity``: ``invalid_payload``, vLLM
``invalid_json``); an ``event_id`` over ``MAX_EVENT_ID_CHARS`` is ``invalid_value`` and never
echoed.
"""

from __future__ import annotations

import enum
import secrets
import string
from typing import Any, ClassVar, Literal

import pybase64
from pydantic import BaseModel, ConfigDict, Field

from asr.errors import MESSAGES
from gateway import jsontext
from gateway.wording import count

_ALPHABET = string.ascii_letters + string.digits
MAX_EVENT_ID_CHARS = 512  # longer client event ids are refused, never echoed


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
    limit: int | None = None,
) -> ClientEvent:
    """Parse one frame into the typed event of the dialect it is in (after its own DI-2
    signal); RealtimeProtocolError for anything else, ``jsontext.TooLarge`` for a frame over
    ``limit`` bytes (LM-1). ``pcm16``: appends must have whole samples.

    Blocking on large frames (JSON and base64): the consumer runs those off the loop (AR-2).
    """
    vllm = dialect is Dialect.VLLM
    body = _object(text, data, vllm, limit)
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


def _object(
    text: str | None, data: bytes | None, vllm: bool, limit: int | None
) -> Body:
    """The frame as a JSON object (issue 9: ``gateway.jsontext`` rules), measured first."""
    if text is None:
        if data is not None and limit is not None:
            jsontext.check_size(data, limit)
        raise RealtimeProtocolError("invalid_payload", MESSAGES["binary_frame"])
    try:
        body = jsontext.loads(text, limit=limit)
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
