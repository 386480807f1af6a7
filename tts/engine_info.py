"""What both processes know about a TTS engine without loading it: its voices, rates and
defaults (tts §8, §13.2). The engines themselves are in ``tts.worker.engines``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
    # How its word timestamps are timed (issue 35): "durations" (the model's own phoneme
    # durations), "estimate" (tts.worker.engines.word_marks) or "exact" (the fake tone).
    word_timestamps: str = "estimate"
    # S3 defaults when the table depends on the checkpoint (vllm-snac); else speakers' own.
    aliases: Mapping[str, str] = field(default_factory=dict)

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
        word_timestamps="durations",
    ),
    "fake": EngineInfo(
        wire_name="fake",
        model_version="fake/tone",
        native_rate=22_050,
        voices=(VoiceInfo(id="tone", name="Tone", languages=("en-US",)),),
        supports_speed=True,
        word_timestamps="exact",
    ),
}


def vllm_engine_info() -> EngineInfo:
    """The vLLM engine as configured: its checkpoint's recipe and voices (tts S1, §13.2)."""
    from django.conf import settings

    from tts.orpheus.snac_tokens import SNAC_RATE
    from tts.orpheus.vllm_config import SEGMENT_PAUSE_MS, WIRE_NAME, VllmTtsConfig

    config = VllmTtsConfig.from_settings(settings)
    languages = config.recipe.languages
    return EngineInfo(
        wire_name=WIRE_NAME,
        model_version=config.model_version,
        native_rate=SNAC_RATE,
        voices=tuple(
            VoiceInfo(id=v, name=v.capitalize(), languages=languages)
            for v in config.voices
        ),
        supports_speed=False,
        supports_seed=True,
        sampling_params=True,
        segment_pause_ms=SEGMENT_PAUSE_MS,
        aliases=config.aliases,
    )


def engine_info(name: str) -> EngineInfo:
    """What the gateway knows about engine ``name`` (a TTS_ENGINE value)."""
    if name == "vllm":
        return vllm_engine_info()
    return ENGINE_INFO[name]


def segment_pause_ms(engine_name: str) -> int:
    """AU9: TTS_SEGMENT_PAUSE_MS when set, else the engine's own default."""
    from django.conf import settings

    from tts.orpheus.vllm_config import SEGMENT_PAUSE_MS, WIRE_NAME

    configured = settings.TTS_SEGMENT_PAUSE_MS
    if configured is not None:
        return int(configured)
    if engine_name == WIRE_NAME:
        return SEGMENT_PAUSE_MS
    info = next((i for i in ENGINE_INFO.values() if i.wire_name == engine_name), None)
    return info.segment_pause_ms if info is not None else 0
