"""Registry of TTS engines; heavy modules are imported only by the loader that needs them."""

from __future__ import annotations

from collections.abc import Callable

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


class EngineInfo:
    """What the gateway knows about an engine without loading it (voices, rates)."""

    def __init__(
        self,
        *,
        model_version: str,
        native_rate: int,
        voices: tuple[str, ...],
        speed: bool,
    ) -> None:
        self.model_version, self.native_rate = model_version, native_rate
        self.voices, self.supports_speed = voices, speed


ENGINE_INFO: dict[str, EngineInfo] = {
    "piper": EngineInfo(
        model_version="piper/en_US-joe-medium",
        native_rate=22_050,
        voices=("joe",),
        speed=True,
    ),
    "fake": EngineInfo(
        model_version="fake/tone", native_rate=22_050, voices=("tone",), speed=True
    ),
}
