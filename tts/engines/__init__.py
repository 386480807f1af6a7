"""Registry of TTS engines; heavy modules are imported only by the loader that needs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tts.engines.base import TtsEngine


def load_piper() -> TtsEngine:
    """Load the bundled Piper voice (CPU)."""
    from tts.engines.piper import PiperTts

    return PiperTts.load()


def load_fake() -> TtsEngine:
    """Build the deterministic test engine."""
    from django.conf import settings

    from tts.engines.fake import FakeTts

    return FakeTts(chunk_delay_s=getattr(settings, "FAKE_TTS_CHUNK_DELAY_S", 0.0))


ENGINES: dict[str, Callable[[], TtsEngine]] = {"piper": load_piper, "fake": load_fake}


@dataclass(frozen=True)
class VoiceInfo:
    """A voice as ``GET /v1/tts/speakers`` lists it (H6–H7)."""

    id: str
    name: str
    languages: tuple[str, ...]
    gender: str | None = None


@dataclass(frozen=True)
class EngineInfo:
    """What the gateway knows about an engine without loading it (tts §8, §13.2)."""

    wire_name: str  # the engine as clients see it (header.engine, speakers.engine)
    model_version: str
    native_rate: int
    voices: tuple[VoiceInfo, ...]
    supports_speed: bool
    supports_seed: bool = False
    sampling_params: bool = False
    segment_pause_ms: int = 0  # AU9 default of TTS_SEGMENT_PAUSE_MS

    @property
    def voice_ids(self) -> tuple[str, ...]:
        """The engine's voice ids (S1)."""
        return tuple(v.id for v in self.voices)


ENGINE_INFO: dict[str, EngineInfo] = {
    "piper": EngineInfo(
        wire_name="piper",
        model_version="piper/en_US-joe-medium",
        native_rate=22_050,
        voices=(VoiceInfo(id="joe", name="Joe", languages=("en-US",)),),
        supports_speed=True,
    ),
    "fake": EngineInfo(
        wire_name="fake",
        model_version="fake/tone",
        native_rate=22_050,
        voices=(VoiceInfo(id="tone", name="Tone", languages=("en-US",)),),
        supports_speed=True,
    ),
}


def segment_pause_ms(engine_name: str) -> int:
    """AU9: TTS_SEGMENT_PAUSE_MS when set, else the engine's own default."""
    from django.conf import settings

    configured = getattr(settings, "TTS_SEGMENT_PAUSE_MS", None)
    if configured is not None:
        return int(configured)
    info = next((i for i in ENGINE_INFO.values() if i.wire_name == engine_name), None)
    return info.segment_pause_ms if info is not None else 0
