"""Names OpenAI clients use: served models with their aliases, and OpenAI's voice names.

TTS: the engine's wire name and model version, plus ``OPENAI_TTS_MODEL_ALIASES`` (``tts-1``,
``tts-1-hd``, ``gpt-4o-mini-tts``). ASR: ``ASR_MODEL`` plus ``ASR_MODEL_ALIASES`` (the
realtime socket's list: ``whisper-1``, ``gpt-4o-transcribe``, ...). An OpenAI voice name
(``alloy``, ``nova``, ...) maps through ``OPENAI_TTS_VOICES``, else to the engine's default
speaker; any other name is one of ours (a voice id or a ``TTS_SPEAKER_ALIASES`` alias).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from tts.speakers import DEFAULT_SPEAKER, configured_engine

OPENAI_VOICES = (
    "alloy ash ballad cedar coral echo fable marin nova onyx sage shimmer verse"
).split()
OWNER = "veena"


@dataclass(frozen=True)
class ServedModel:
    """One entry of ``GET /v1/models``; ``alias_of`` names the model an alias serves."""

    id: str
    kind: str  # "tts" | "asr"
    alias_of: str | None = None


def tts_models() -> list[ServedModel]:
    """The TTS engine's names, then its aliases."""
    info = configured_engine()
    own = [info.model_version, info.wire_name]
    aliases = [a for a in settings.OPENAI_TTS_MODEL_ALIASES if a not in own]
    return [ServedModel(own[0], "tts"), ServedModel(own[1], "tts", own[0])] + [
        ServedModel(a, "tts", own[0]) for a in aliases
    ]


def asr_models() -> list[ServedModel]:
    """``ASR_MODEL``, then its aliases."""
    served = settings.ASR_MODEL
    return [ServedModel(served, "asr")] + [
        ServedModel(a, "asr", served) for a in settings.ASR_MODEL_ALIASES if a != served
    ]


def served_models() -> list[ServedModel]:
    """Every model name the audio endpoints accept."""
    return tts_models() + asr_models()


def speaker_for(voice: str) -> str:
    """The TTS speaker name a requested voice stands for (then resolved as on the socket)."""
    key = voice.strip().lower()
    mapped = {k.lower(): v for k, v in settings.OPENAI_TTS_VOICES.items()}
    if key in mapped:
        return str(mapped[key])
    return DEFAULT_SPEAKER if key in OPENAI_VOICES else voice
