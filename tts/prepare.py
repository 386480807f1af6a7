"""From a validated request to its voice and worker segments (docs/specs/tts-ws.md L1 steps 4–6).

Every TTS request comes here once, through ``tts.requests.start_request``: the engine checks
and the speaker (R5, §8), then the text segmented and normalised (§7, ``tts.text``), and the
one speakable-text check (R7): a text none of whose segments has a letter or digit is refused.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from django.conf import settings

from tts.engine_info import EngineInfo
from tts.protocol import TtsProtocolError, TtsRequest
from tts.speakers import UnknownSpeaker, resolve_speaker
from tts.text import Segment, segment_payload, text_payload

OFF_LOOP_CHARS = 2000  # T1: longer texts are segmented and normalised in a thread


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


async def prepare(
    req: TtsRequest, info: EngineInfo
) -> tuple[str, list[dict[str, Any]]]:
    """The request's voice and worker segments (none yet for an incremental request, whose
    text comes later), computed off the event loop for long texts (T1); raise
    ``TtsProtocolError`` when it cannot run (R5, R7)."""
    voice = resolve_voice(req, info)
    if req.incremental:
        return voice, []
    payload = partial(
        text_payload,
        req.text,
        chunking=req.chunking,
        normalize=req.normalize,
        min_chars=settings.TTS_SEGMENT_MIN_CHARS,
        max_chars=settings.TTS_SEGMENT_MAX_CHARS,
    )
    long = len(req.text) > OFF_LOOP_CHARS
    segments = await asyncio.to_thread(payload) if long else payload()
    if not segments:
        raise TtsProtocolError("VALIDATION_ERROR", "Text has no speakable content")
    return voice, segments


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
