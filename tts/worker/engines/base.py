"""The TTS engine interface: text in, float32 PCM chunks at the engine's native rate out."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tts.messages import Sampling

Pcm = npt.NDArray[np.float32]


@dataclass
class EngineStats:
    """Counts a token engine reports for its segments (tts AU7; zero for Piper)."""

    tokens: int = 0  # ids the model generated
    snac_frames: int = 0  # complete SNAC frames decoded to audio
    frames_dropped: int = 0  # frames lost to a token of the wrong slot
    tokens_ignored: int = 0  # generated ids outside the audio range
    truncated: bool = False  # a segment hit its token limit

    def add(self, other: EngineStats) -> None:
        """Add another segment's counts."""
        self.tokens += other.tokens
        self.snac_frames += other.snac_frames
        self.frames_dropped += other.frames_dropped
        self.tokens_ignored += other.tokens_ignored
        self.truncated = self.truncated or other.truncated


@dataclass(frozen=True)
class WordMark:
    """A spoken word and its audio, in native samples from the segment's first sample."""

    word: str = field(repr=False)
    start: int
    end: int


@dataclass(frozen=True)
class TtsEngineRequest(Sampling):
    """One segment of text for the engine, with the resolved voice and options."""

    text: str = field(repr=False)
    voice: str
    # No audio of the request has gone out yet: its first audio waits for this segment.
    leading: bool = True
    # Mark the words (issue 35): the engine appends each word to ``words`` before it
    # yields the chunk in which (or before which) the word's audio starts.
    word_timestamps: bool = False
    # Filled in by the engine while it streams the segment.
    stats: EngineStats = field(default_factory=EngineStats, compare=False, repr=False)
    words: list[WordMark] = field(default_factory=list, compare=False, repr=False)


class TtsEngine(Protocol):
    """A loaded TTS backend; one instance per worker process serves every slot."""

    name: str
    model_version: str
    native_rate: int
    voices: tuple[str, ...]
    default_voice: str
    supports_speed: bool

    def stream(self, req: TtsEngineRequest) -> AsyncGenerator[Pcm, None]:
        """Yield mono float32 chunks in [-1, 1]; cancelling or closing it stops work in ≤ 200 ms."""
        ...

    def close(self) -> None:
        """Release threads and native sessions."""
        ...
