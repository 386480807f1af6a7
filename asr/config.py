"""Session configuration of ``/v1/realtime``: the effective configuration and its echoes.

``SessionConfig`` is what a session runs with (SE-1), ``default_config`` its SE-2 defaults, and
``session_object`` / ``beta_session_object`` the echoed objects (SE-1, SE-12). Updates are
validated in ``asr/updates.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asr.audio import InputFormat
from asr.languages import WHISPER_LANGUAGES
from asr.messages import FINAL

LOGPROBS_INCLUDE = "item.input_audio_transcription.logprobs"
WORD_GRANULARITY = "word"  # ``timestamp_granularities``: completed has word times
DEFAULT_RATE = 24_000
VLLM_RATE = 16_000
BETA_FORMATS = {
    "pcm16": "audio/pcm",
    "g711_ulaw": "audio/pcmu",
    "g711_alaw": "audio/pcma",
}
BETA_FORMAT_NAMES = {v: k for k, v in BETA_FORMATS.items()}


class ConfigError(Exception):
    """One SE-9 failure: ``code``, a fixed ``message`` and the dotted ``param``."""

    def __init__(self, code: str, message: str, param: str | None) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


@dataclass(frozen=True)
class TurnDetection:
    """server_vad parameters with OpenAI's defaults (VD-3)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    def echo(self) -> dict[str, Any]:
        """The echoed object: exactly these four fields (SE-3)."""
        return {"type": "server_vad", **dataclasses.asdict(self)}


@dataclass(frozen=True)
class SessionConfig:
    """The effective configuration of one session (SE-1)."""

    model: str
    format: InputFormat = "audio/pcm"
    rate: int = DEFAULT_RATE
    language: str | None = None
    prompt: str | None = None
    turn_detection: TurnDetection | None = None
    noise_reduction: dict[str, Any] | None = None
    include: tuple[str, ...] | None = None
    transcript: str = FINAL  # asr.messages.TRANSCRIPT_SOURCES
    timestamp_granularities: tuple[str, ...] | None = None

    @property
    def logprobs(self) -> bool:
        """Whether deltas carry logprobs (IT-10)."""
        return LOGPROBS_INCLUDE in (self.include or ())

    @property
    def words(self) -> bool:
        """Whether ``completed`` carries the times of its words (IT-16)."""
        return WORD_GRANULARITY in (self.timestamp_granularities or ())

    def transcription(self) -> dict[str, Any]:
        """The echoed ``transcription`` object (SE-3); the extensions only when they are
        not at their defaults, so a client that never sets them sees OpenAI's object."""
        echo: dict[str, Any] = {
            "model": self.model,
            "language": self.language,
            "prompt": self.prompt,
        }
        if self.transcript != FINAL:
            echo["transcript"] = self.transcript
        if self.timestamp_granularities is not None:
            echo["timestamp_granularities"] = list(self.timestamp_granularities)
        return echo


@dataclass(frozen=True)
class Models:
    """What the served model accepts: names (SE-15) and languages (row 8)."""

    served: str
    aliases: tuple[str, ...]
    english_only: bool
    max_prompt_chars: int | None = None  # ASR_MAX_PROMPT_CHARS (issue 9); None: no cap
    max_include: int = 4  # entries of ``include`` (one value is known)

    def prompt_ok(self, prompt: object) -> bool:
        """True for a string prompt within the length cap."""
        cap = self.max_prompt_chars
        return isinstance(prompt, str) and (cap is None or len(prompt) <= cap)

    def allowed(self, name: object) -> bool:
        """True for the served name or an alias."""
        return isinstance(name, str) and (name == self.served or name in self.aliases)

    def language_ok(self, code: object) -> bool:
        """True for a language the model can transcribe."""
        if self.english_only:
            return code == "en"
        return isinstance(code, str) and code in WHISPER_LANGUAGES


def default_config(
    models: Models, *, query_model: str | None, turn: Any, vllm: bool
) -> SessionConfig:
    """SE-2 defaults; ``turn`` is ``ASR_DEFAULT_TURN_DETECTION``."""
    return SessionConfig(
        model=query_model
        if query_model is not None and models.allowed(query_model)
        else models.served,
        rate=VLLM_RATE if vllm else DEFAULT_RATE,
        turn_detection=TurnDetection(**turn_fields(turn)) if turn else None,
    )


def turn_fields(turn: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(TurnDetection)}
    return {k: v for k, v in turn.items() if k in names and v is not None}


# Echoes.


def session_object(
    config: SessionConfig, *, session_id: str, expires_at: int
) -> dict[str, Any]:
    """The GA transcription session object of session.created/updated (SE-1, SE-3)."""
    fmt: dict[str, Any] = {"type": config.format}
    if config.format == "audio/pcm":
        fmt["rate"] = config.rate
    turn = config.turn_detection.echo() if config.turn_detection else None
    return {
        "type": "transcription",
        "id": session_id,
        "object": "realtime.transcription_session",
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": fmt,
                "noise_reduction": config.noise_reduction,
                "transcription": config.transcription(),
                "turn_detection": turn,
            }
        },
        "include": list(config.include) if config.include is not None else None,
    }


def beta_session_object(config: SessionConfig, *, session_id: str) -> dict[str, Any]:
    """The beta session object of transcription_session.updated (SE-12)."""
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "input_audio_format": BETA_FORMAT_NAMES[config.format],
        "input_audio_transcription": config.transcription(),
        "turn_detection": config.turn_detection.echo()
        if config.turn_detection
        else None,
        "input_audio_noise_reduction": config.noise_reduction,
        "include": list(config.include) if config.include is not None else None,
        "modalities": ["text"],
    }
