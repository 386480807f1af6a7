"""The TTS engine interface: text in, float32 PCM chunks at the engine's native rate out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

Pcm = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TtsEngineRequest:
    """One segment of text for the engine, with the resolved voice and options."""

    text: str = field(repr=False)
    voice: str
    speed: float = 1.0
    seed: int | None = None
    temperature: float = 0.8
    top_k: int = 50
    top_p: float = 1.0
    max_tokens: int = 4096
    repetition_penalty: float = 1.05


class TtsEngine(Protocol):
    """A loaded TTS backend; one instance per worker process serves every slot."""

    name: str
    model_version: str
    native_rate: int
    voices: tuple[str, ...]
    default_voice: str
    supports_speed: bool

    def stream(self, req: TtsEngineRequest) -> AsyncIterator[Pcm]:
        """Yield mono float32 chunks in [-1, 1]; cancelling the consumer stops work in ≤ 200 ms."""
        ...

    def close(self) -> None:
        """Release threads and native sessions."""
        ...
