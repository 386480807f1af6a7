"""Speaker resolution and listing (docs/specs/tts-ws.md §8, §13.2): voice ids and alias tables,
and the configured engine whose voices they are."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from gateway.liveness import get_liveness
from tts.engine_info import EngineInfo, engine_info

DEFAULT_SPEAKER = "male1"
REFERENCE_NAMES = ("male1", "kavya", "agastya", "maitri", "vinaya")
# S3: the reference's names resolve on every engine. Deployments override with
# TTS_SPEAKER_ALIASES.
ENGINE_ALIASES: dict[str, dict[str, str]] = {
    "piper": {name: "joe" for name in REFERENCE_NAMES} | {"en_us-joe-medium": "joe"},
    "fake": {name: "tone" for name in REFERENCE_NAMES},
}
_WRAPPED = re.compile(r"<spk_(.+)>")


def configured_engine() -> EngineInfo:
    """The engine ``TTS_ENGINE`` names, as the gateway knows it (static, or from the vLLM
    settings)."""
    return engine_info(settings.TTS_ENGINE)


class UnknownSpeaker(Exception):
    """The requested speaker is neither a voice id nor an alias."""

    def __init__(self, name: str, valid: list[str]) -> None:
        super().__init__(name)
        self.name, self.valid = name, valid

    @property
    def message(self) -> str:
        """S4's fixed wording, naming at most 64 characters of the client's input."""
        return f"Unknown speaker '{self.name[:64]}'. Valid speakers: {', '.join(self.valid)}"


def alias_table(
    info: EngineInfo, overrides: dict[str, Any] | None = None
) -> dict[str, str]:
    """The engine's aliases (S3, then TTS_SPEAKER_ALIASES), only those naming a voice."""
    table = dict(info.aliases or ENGINE_ALIASES.get(info.wire_name, {}))
    table.update((overrides or {}).get(info.wire_name, {}))
    ids = set(info.voice_ids)
    return {k.lower(): v for k, v in table.items() if v in ids and k.lower() not in ids}


def accepted_names(
    info: EngineInfo, overrides: dict[str, Any] | None = None
) -> list[str]:
    """Every name the engine accepts (ids and aliases), sorted (S4, S5)."""
    return sorted(set(info.voice_ids) | set(alias_table(info, overrides)))


def resolve_speaker(
    name: str, info: EngineInfo, overrides: dict[str, Any] | None = None
) -> str:
    """S2: trim, lower-case, unwrap ``<spk_x>``; a voice id, else an alias; else raise."""
    key = name.strip().lower()
    unwrapped = _WRAPPED.fullmatch(key)
    key = unwrapped.group(1) if unwrapped else key
    if key in info.voice_ids:
        return key
    target = alias_table(info, overrides).get(key)
    if target is not None:
        return target
    raise UnknownSpeaker(name, accepted_names(info, overrides))


def speakers_listing(
    info: EngineInfo, *, ready: bool, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The body of ``GET /v1/tts/speakers`` (H6–H7)."""
    from tts.audio import FORMATS, SAMPLE_RATES

    aliases = alias_table(info, overrides)
    default_voice = resolve_speaker(DEFAULT_SPEAKER, info, overrides)
    speakers = [
        {
            "id": voice.id,
            "name": voice.name,
            "languages": list(voice.languages),
            "gender": voice.gender,
            "default": voice.id == default_voice,
            "aliases": sorted(a for a, v in aliases.items() if v == voice.id),
        }
        for voice in sorted(info.voices, key=lambda v: v.id)
    ]
    return {
        "engine": info.wire_name,
        "model_version": info.model_version,
        "ready": ready,
        "native_sample_rate": info.native_rate,
        "sample_rates": list(SAMPLE_RATES),
        "formats": list(FORMATS),
        "default_speaker": DEFAULT_SPEAKER,
        "capabilities": {
            "speed": info.supports_speed,
            "seed": info.supports_seed,
            "sampling_params": info.sampling_params,
            "timestamps": "sentence",
            "word_timestamps": info.word_timestamps,
        },
        "speakers": speakers,
    }


def voices_listing() -> dict[str, Any]:
    """The body of ``GET /v1/tts/speakers`` for the configured engine, and whether a worker
    serves it now (H6): the TTS view's, the OpenAI voices' and the playground's."""
    ready = any(s.serves("tts") for s in get_liveness().live_workers())
    return speakers_listing(
        configured_engine(), ready=ready, overrides=settings.TTS_SPEAKER_ALIASES
    )
