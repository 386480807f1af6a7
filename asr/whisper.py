"""What both processes know of a Whisper decode: the rate and window of its input, and a
decoded segment (the shape a final carries to the gateway, ``openai_rest.transcripts``)."""

from __future__ import annotations

from dataclasses import dataclass, field

MODEL_RATE = 16_000
# Whisper's encoder window, 30 s: longer audio is decoded window by window
WINDOW_SAMPLES = 30 * MODEL_RATE


@dataclass(frozen=True)
class DecodedSegment:
    """One of Whisper's segments: times in seconds from the start of the decoded audio (of
    the file, once placed in it), its tokens (timestamps included), and the decode's
    confidence as Whisper's ``transcribe`` reports it: the window's average token log
    probability, its ``<|nospeech|>`` probability and its text's compression ratio."""

    start: float
    end: float
    text: str = field(repr=False)
    tokens: tuple[int, ...] = field(default=(), repr=False)
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 1.0
    temperature: float = 0.0
