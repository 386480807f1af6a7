"""The server events of each realtime dialect for one output (realtime §15, VL-9).

The one place where outputs become wire events: ``server_events`` serializes a session output
(``asr.outputs``) or a session echo (below) in the session's dialect, and ``error`` builds the
dialect's error envelope. Pure functions: the consumer sends what they return. OpenAI-dialect
events are built and SDK-validated by ``asr.protocol``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from asr import event_schema
from asr.config import beta_session_object, session_object
from asr.errors import FAILED_ERROR, MESSAGES
from asr.event_schema import error_event, server_event, user_item, vllm_done, vllm_error
from asr.outputs import (
    Committed,
    Completed,
    Delta,
    Failed,
    Item,
    SpeechStarted,
    SpeechStopped,
)
from asr.protocol import Dialect
from asr.session import RealtimeSession


@dataclass(frozen=True)
class SessionCreated:
    """CN-7: the session is open."""


@dataclass(frozen=True)
class SessionUpdated:
    """SE-1 ``session.updated``, or with ``beta`` SE-12 ``transcription_session.updated``."""

    beta: bool = False


@dataclass(frozen=True)
class ModelValidated:
    """vLLM's ``session.updated{model}`` (VL-2)."""

    model: str


@dataclass(frozen=True)
class BufferCleared:
    """IT-14: ``input_audio_buffer.cleared``."""


ItemOut = SpeechStarted | SpeechStopped | Committed | Delta | Completed | Failed
ClientOut = ItemOut | SessionCreated | SessionUpdated | ModelValidated | BufferCleared


def server_events(out: ClientOut, session: RealtimeSession) -> list[dict[str, Any]]:
    """The wire events of one output in the session's dialect (undetermined: OpenAI)."""
    if isinstance(out, SessionCreated):  # CN-7: the GA shape in both dialects
        return [
            server_event(
                "session.created",
                id=session.session_id,
                created=int(session.created_at),
                session=_session_object(session),
            )
        ]
    if isinstance(out, ModelValidated):
        return [event_schema.VllmSessionUpdated(model=out.model).model_dump()]
    if isinstance(out, SessionUpdated):
        return [_session_updated(session, beta=out.beta)]
    if isinstance(out, BufferCleared):
        return [server_event("input_audio_buffer.cleared")]
    logprobs = session.config.logprobs
    if session.dialect is Dialect.VLLM:
        return vllm_events(out, logprobs=logprobs)
    return openai_events(out, beta=session.beta, logprobs=logprobs)


class ErrorFields(TypedDict, total=False):
    """The optional fields of an error event (ER-1, AU-5)."""

    param: str | None
    event_id: str | None  # the client event's
    retry_after_ms: int | None


def error(
    code: str, text: str, *, openai: bool, **fields: Unpack[ErrorFields]
) -> dict[str, Any]:
    """The error envelope: OpenAI's (ER-1) or with ``openai`` False vLLM's flat one (VL-1)."""
    if openai:
        return error_event(
            code,
            text,
            param=fields.get("param"),
            client_event_id=fields.get("event_id"),
            retry_after_ms=fields.get("retry_after_ms"),
        )
    return vllm_error(code, text)


def _session_updated(session: RealtimeSession, *, beta: bool) -> dict[str, Any]:
    if not beta:
        return server_event("session.updated", session=_session_object(session))
    echo = beta_session_object(session.config, session_id=session.session_id)
    return server_event("transcription_session.updated", session=echo)


def _session_object(session: RealtimeSession) -> dict[str, Any]:
    return session_object(
        session.config, session_id=session.session_id, expires_at=session.expires_at
    )


def openai_events(out: ItemOut, *, beta: bool, logprobs: bool) -> list[dict[str, Any]]:
    """The OpenAI-dialect events of one session output (GA, or beta with ``beta``)."""
    item = out.item
    if isinstance(out, SpeechStarted):
        return [
            server_event(
                "input_audio_buffer.speech_started",
                audio_start_ms=out.ms,
                item_id=item.item_id,
            )
        ]
    if isinstance(out, SpeechStopped):
        return [
            server_event(
                "input_audio_buffer.speech_stopped",
                audio_end_ms=out.ms,
                item_id=item.item_id,
            )
        ]
    if isinstance(out, Committed):
        announce = "conversation.item.created" if beta else "conversation.item.added"
        return [
            server_event(
                "input_audio_buffer.committed",
                previous_item_id=item.previous_item_id,
                item_id=item.item_id,
            ),
            server_event(
                announce,
                previous_item_id=item.previous_item_id,
                item=user_item(item.item_id, None),
            ),
        ]
    if isinstance(out, Delta):
        fields: dict[str, Any] = {"item_id": item.item_id, "content_index": 0}
        fields["delta"] = out.text
        if logprobs:
            fields["logprobs"] = out.logprobs or []
        return [
            server_event("conversation.item.input_audio_transcription.delta", **fields)
        ]
    if isinstance(out, Completed):
        fields = {
            "item_id": item.item_id,
            "content_index": 0,
            "transcript": out.transcript,
            "usage": {"type": "duration", "seconds": item.usage_seconds},
        }
        if logprobs:
            fields["logprobs"] = out.logprobs or []
        if out.words is not None:  # extension: timestamp_granularities ["word"]
            fields["words"] = out.words
        done = item_done(item, out.transcript, beta=beta)
        return [
            server_event(
                "conversation.item.input_audio_transcription.completed", **fields
            ),
            *done,
        ]
    assert isinstance(out, Failed)
    return [
        server_event(
            "conversation.item.input_audio_transcription.failed",
            item_id=item.item_id,
            content_index=0,
            error=dict(FAILED_ERROR),
        ),
        *item_done(item, None, beta=beta),
    ]


def item_done(
    item: Item, transcript: str | None, *, beta: bool
) -> list[dict[str, Any]]:
    """``conversation.item.done`` of a finished item (none for beta clients)."""
    if beta:
        return []  # IT-6: beta clients get no conversation.item.done
    return [
        server_event(
            "conversation.item.done",
            previous_item_id=item.previous_item_id,
            item=user_item(item.item_id, transcript),
        )
    ]


def vllm_events(out: ItemOut, *, logprobs: bool) -> list[dict[str, Any]]:
    """The vLLM-dialect events of one session output."""
    if isinstance(out, Delta):
        event = event_schema.VllmDelta(
            delta=out.text, logprobs=(out.logprobs or []) if logprobs else None
        )
        return [event.model_dump()]
    if isinstance(out, Completed):
        return [vllm_done(out.transcript, out.prompt_tokens, out.completion_tokens)]
    if isinstance(out, Failed):
        return [vllm_error("inference_failed", MESSAGES["inference_failed"])]
    return []  # VL-9: no VAD, committed or item events in this dialect
