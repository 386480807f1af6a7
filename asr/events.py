"""The server events of each realtime dialect for one session output (realtime §15, VL-9).

Pure functions: the consumer (``asr/wire.py``) sends what they return. Events are built and
SDK-validated by ``asr.protocol``.
"""

from __future__ import annotations

from typing import Any

from asr import protocol
from asr.items import (
    Committed,
    Completed,
    Delta,
    Failed,
    Item,
    SpeechStarted,
    SpeechStopped,
)
from asr.protocol import (
    FAILED_ERROR,
    MESSAGES,
    server_event,
    user_item,
    vllm_done,
    vllm_error,
)

ClientOut = SpeechStarted | SpeechStopped | Committed | Delta | Completed | Failed


def openai_events(
    out: ClientOut, *, beta: bool, logprobs: bool
) -> list[dict[str, Any]]:
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
            fields["logprobs"] = item.logprobs
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


def vllm_events(out: ClientOut, *, logprobs: bool) -> list[dict[str, Any]]:
    """The vLLM-dialect events of one session output."""
    if isinstance(out, Delta):
        event = protocol.VllmDelta(
            delta=out.text, logprobs=(out.logprobs or []) if logprobs else None
        )
        return [event.model_dump()]
    if isinstance(out, Completed):
        return [vllm_done(out.transcript, out.prompt_tokens, out.completion_tokens)]
    if isinstance(out, Failed):
        return [vllm_error("inference_failed", MESSAGES["inference_failed"])]
    return []  # VL-9: no VAD, committed or item events in this dialect
