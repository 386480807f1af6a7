"""From a validated request to worker segments: speaker, engine checks, text (L1 steps 4–6).

Shared by the WebSocket consumer and the REST view, so both apply the same rules (H1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from tts.engine_info import EngineInfo
from tts.engine_info import engine_info as info_of
from tts.normalize import has_speakable, normalize_text
from tts.protocol import TtsProtocolError, TtsRequest
from tts.speakers import UnknownSpeaker, resolve_speaker
from tts.text import Segment, segment_text

OFF_LOOP_CHARS = 2000  # T1: longer texts are segmented and normalised in a thread


def engine_info() -> EngineInfo:
    """The configured engine's description (static, or from the vLLM settings)."""
    return info_of(settings.TTS_ENGINE)


def resolve_voice(req: TtsRequest, info: EngineInfo) -> str:
    """R5 and §8: check engine support, then resolve the speaker (last, as in R1)."""
    if req.speed != 1.0 and not info.supports_speed:
        raise TtsProtocolError(
            "VALIDATION_ERROR", f"speed is not supported by engine {info.wire_name}"
        )
    try:
        return resolve_speaker(req.speaker, info, settings.TTS_SPEAKER_ALIASES)
    except UnknownSpeaker as unknown:
        error = TtsProtocolError("VALIDATION_ERROR", unknown.message[:500])
        error.extra = {"valid_speakers": unknown.valid}
        raise error from None


def check_speakable(text: str) -> None:
    """R7: some letter or digit must remain after normalisation."""
    if not has_speakable(text):
        raise TtsProtocolError("VALIDATION_ERROR", "Text has no speakable content")


def segment_payload(
    source: str, segments: Iterable[Segment], *, normalize: bool
) -> list[dict[str, Any]]:
    """Worker segments: normalised text (T1, T5) with offsets into ``source`` (T7)."""
    payload = []
    for segment in segments:
        raw = segment.text_of(source)
        if not has_speakable(raw):
            continue
        text = normalize_text(raw) if normalize else raw
        payload.append(
            {
                "seq": segment.seq,
                "text": text,
                "char_start": segment.char_start,
                "char_end": segment.char_end,
            }
        )
    return payload


def whole_text_payload(req: TtsRequest) -> list[dict[str, Any]]:
    """Segment and normalise a whole request text (T6)."""
    segments = segment_text(
        req.text,
        chunking=req.chunking,
        min_chars=settings.TTS_SEGMENT_MIN_CHARS,
        max_chars=settings.TTS_SEGMENT_MAX_CHARS,
    )
    return segment_payload(req.text, segments, normalize=req.normalize)


async def prepare_segments(req: TtsRequest) -> list[dict[str, Any]]:
    """T1: the request's worker segments, computed off the event loop for long texts."""
    check_speakable(req.text)
    if len(req.text) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(whole_text_payload, req)
    return whole_text_payload(req)


async def prepare_pieces(
    source: str, segments: list[Segment], *, normalize: bool
) -> list[dict[str, Any]]:
    """Incremental segments (§9.2), normalised off the loop when they are long (T1)."""
    size = sum(s.char_end - s.char_start for s in segments)
    if size > OFF_LOOP_CHARS:
        return await asyncio.to_thread(
            segment_payload, source, segments, normalize=normalize
        )
    return segment_payload(source, segments, normalize=normalize)
