"""Validation of ``/v1/realtime`` session updates (SE-6, SE-9, VL-2).

``validate_update`` runs the SE-9 checks in their order on a GA ``session.update`` or (with
beta paths) a ``transcription_session.update`` and returns the new configuration without
touching the old one (SE-6: atomic). vLLM's flat update is ``asr.vllm_update``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asr.audio import G711_RATE, INPUT_RATES
from asr.config import (
    BETA_FORMATS,
    DEFAULT_RATE,
    LOGPROBS_INCLUDE,
    WORD_GRANULARITY,
    ConfigError,
    Models,
    SessionConfig,
    TurnDetection,
    turn_fields,
)
from asr.messages import FINAL, TRANSCRIPT_SOURCES
from gateway.wording import count

NOISE_TYPES = ("near_field", "far_field")
# Extensions of ``transcription`` (issue 34), merged and echoed like its other keys.
EXTENSION_KEYS = ("transcript", "timestamp_granularities")
MAX_GRANULARITIES = 4
TRANSCRIPTION_KEYS = ("model", "language", "prompt", *EXTENSION_KEYS)
MAX_MS = 10_000  # SE-9 row 12
# SE-9 row 4: the keys a GA transcription session may carry (None = a leaf).
Schema = dict[str, "Schema | None"]
TURN_KEYS: Schema = dict.fromkeys(
    (
        "type",
        "threshold",
        "prefix_padding_ms",
        "silence_duration_ms",
        "idle_timeout_ms",
        "create_response",
        "interrupt_response",
        "eagerness",
    )
)
GA_SCHEMA: Schema = {
    "type": None,
    "id": None,
    "object": None,
    "expires_at": None,
    "include": None,
    "audio": {
        "input": {
            "format": {"type": None, "rate": None},
            "transcription": dict.fromkeys(
                (*TRANSCRIPTION_KEYS, "languages", "keywords", "delay")
            ),
            "turn_detection": TURN_KEYS,
            "noise_reduction": {"type": None, "strength": None},
        }
    },
}
BETA_SCHEMA: Schema = {
    "id": None,
    "object": None,
    "expires_at": None,
    "client_secret": None,
    "modalities": None,
    "include": None,
    "input_audio_format": None,
    "input_audio_transcription": dict.fromkeys(TRANSCRIPTION_KEYS),
    "turn_detection": TURN_KEYS,
    "input_audio_noise_reduction": {"type": None},
}


def _fail(code: str, param: str, message: str | None = None) -> ConfigError:
    return ConfigError(code, message or f"Invalid value for '{param}'.", param)


def _unknown_keys(value: Any, schema: Schema, path: str) -> None:
    """Row 4: the first key that the schema does not know."""
    if not isinstance(value, dict):
        return
    for key in value:
        param = f"{path}.{key}"
        if key not in schema:
            shown = param if len(param) <= 96 else param[:93] + "..."
            raise ConfigError(
                "unknown_parameter", f"Unknown parameter: '{shown}'.", shown
            )
        child = schema[key]
        if child is not None:
            _unknown_keys(value[key], child, param)


@dataclass
class Field:
    """One field of an update: present or not, its value and its wire path."""

    value: Any = None
    present: bool = False
    path: str = ""


@dataclass
class Update:
    """An update normalised from GA or beta shape; paths keep the wire names."""

    format: Field
    transcription: Field
    turn_detection: Field
    noise_reduction: Field
    include: Field


def _field(container: Any, key: str, path: str) -> Field:
    if isinstance(container, dict) and key in container:
        return Field(container[key], True, f"{path}.{key}")
    return Field(path=f"{path}.{key}")


def _ga_update(session: Any) -> Update:
    if not isinstance(session, dict):
        raise _fail("invalid_value", "session", "'session' must be an object.")
    if "type" not in session:
        raise _fail(
            "missing_required_parameter",
            "session.type",
            "Missing required parameter: 'session.type'.",
        )
    if session["type"] != "transcription":
        raise _fail(
            "not_supported",
            "session.type",
            "Only 'transcription' sessions are supported on this endpoint.",
        )
    _unknown_keys(session, GA_SCHEMA, "session")
    audio = _field(session, "audio", "session")
    _expect_object(audio)
    input_ = _field(audio.value, "input", audio.path)
    _expect_object(input_)
    return Update(
        format=_field(input_.value, "format", input_.path),
        transcription=_field(input_.value, "transcription", input_.path),
        turn_detection=_field(input_.value, "turn_detection", input_.path),
        noise_reduction=_field(input_.value, "noise_reduction", input_.path),
        include=_field(session, "include", "session"),
    )


def _beta_update(session: Any) -> Update:
    if not isinstance(session, dict):
        raise _fail("invalid_value", "session", "'session' must be an object.")
    _unknown_keys(session, BETA_SCHEMA, "session")
    fmt = _field(session, "input_audio_format", "session")
    if fmt.present and fmt.value is not None:
        if not isinstance(fmt.value, str) or fmt.value not in BETA_FORMATS:
            raise _fail("invalid_value", fmt.path)
        kind = BETA_FORMATS[fmt.value]
        fmt.value = {
            "type": kind,
            "rate": DEFAULT_RATE if kind == "audio/pcm" else G711_RATE,
        }
    return Update(
        format=fmt,
        transcription=_field(session, "input_audio_transcription", "session"),
        turn_detection=_field(session, "turn_detection", "session"),
        noise_reduction=_field(session, "input_audio_noise_reduction", "session"),
        include=_field(session, "include", "session"),
    )


def _expect_object(field: Field, *, nullable: bool = False) -> None:
    if field.present and not isinstance(field.value, dict):
        if not (nullable and field.value is None):
            raise _fail("invalid_value", field.path)


def _expect(value: Any, path: str, *types: type, nullable: bool = True) -> None:
    if value is None and nullable:
        return
    if isinstance(value, bool) and bool not in types:
        raise _fail("invalid_value", path)
    if not isinstance(value, types):
        raise _fail("invalid_value", path)


def _check_types(u: Update) -> None:
    """Row 5: known format types, required ``type`` keys, JSON types everywhere."""
    _expect_object(u.format, nullable=True)
    if isinstance(u.format.value, dict):
        kind = u.format.value.get("type")
        if kind not in ("audio/pcm", "audio/pcmu", "audio/pcma"):
            raise _fail("invalid_value", f"{u.format.path}.type")
        _expect(u.format.value.get("rate"), f"{u.format.path}.rate", int)
    _expect_object(u.transcription, nullable=True)
    if isinstance(u.transcription.value, dict):
        t, path = u.transcription.value, u.transcription.path
        for key in ("model", "language", "prompt", "transcript"):
            _expect(t.get(key), f"{path}.{key}", str)
        _expect_strings(
            t.get("timestamp_granularities"), f"{path}.timestamp_granularities"
        )
    _expect_object(u.turn_detection, nullable=True)
    if isinstance(u.turn_detection.value, dict):
        td, path = u.turn_detection.value, u.turn_detection.path
        if not isinstance(td.get("type"), str):
            raise _fail("invalid_value", f"{path}.type")
        if td["type"] not in ("server_vad", "semantic_vad"):
            raise _fail("invalid_value", f"{path}.type")
        _expect(td.get("threshold"), f"{path}.threshold", int, float)
        for key in ("prefix_padding_ms", "silence_duration_ms", "idle_timeout_ms"):
            _expect(td.get(key), f"{path}.{key}", int)
        for key in ("create_response", "interrupt_response"):
            _expect(td.get(key), f"{path}.{key}", bool)
    _expect_object(u.noise_reduction, nullable=True)
    if isinstance(u.noise_reduction.value, dict):
        _expect(
            u.noise_reduction.value.get("strength"),
            f"{u.noise_reduction.path}.strength",
            int,
            float,
        )
    if u.include.present:
        _expect_strings(u.include.value, u.include.path)


def _expect_strings(value: Any, path: str) -> None:
    """Null or a list of strings."""
    if value is not None and not (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        raise _fail("invalid_value", path)


def _check_values(u: Update, models: Models) -> None:
    """Rows 6 to 14, in order."""
    if isinstance(u.format.value, dict):
        kind, rate = u.format.value["type"], u.format.value.get("rate")
        allowed = INPUT_RATES if kind == "audio/pcm" else (G711_RATE,)
        if rate is not None and rate not in allowed:
            raise _fail("invalid_value", f"{u.format.path}.rate")
    t = u.transcription.value if isinstance(u.transcription.value, dict) else {}
    path = u.transcription.path
    if t.get("model") is not None and not models.allowed(t["model"]):
        raise _fail(
            "not_supported",
            f"{path}.model",
            "Model is not served by this endpoint; use null or a served model name.",
        )
    if t.get("language") is not None and not models.language_ok(t["language"]):
        raise _fail(
            "invalid_value",
            f"{path}.language",
            "Language is not supported by the served model.",
        )
    if t.get("prompt") is not None and not models.prompt_ok(t["prompt"]):
        raise _fail(
            "invalid_value",
            f"{path}.prompt",
            f"'prompt' must be at most {count(models.max_prompt_chars or 0, 'character')}.",
        )
    for key in ("languages", "keywords", "delay"):
        if t.get(key) is not None:
            raise _fail("not_supported", f"{path}.{key}", f"'{key}' is not supported.")
    _check_extensions(t, path)
    _check_turn(u.turn_detection)
    nr = u.noise_reduction.value
    if isinstance(nr, dict) and nr.get("type") not in NOISE_TYPES:
        raise _fail("invalid_value", f"{u.noise_reduction.path}.type")
    if isinstance(u.include.value, list) and (
        len(u.include.value) > models.max_include
        or any(v != LOGPROBS_INCLUDE for v in u.include.value)
    ):
        raise _fail("invalid_value", u.include.path)


def _check_extensions(t: dict[str, Any], path: str) -> None:
    """``transcript`` and ``timestamp_granularities`` (IT-15, IT-16)."""
    check_transcript(t.get("transcript"), "invalid_value", f"{path}.transcript")
    granularities = t.get("timestamp_granularities") or []
    if len(granularities) > MAX_GRANULARITIES or any(
        g != WORD_GRANULARITY for g in granularities
    ):
        message = f"'timestamp_granularities' may only contain '{WORD_GRANULARITY}'."
        raise _fail("invalid_value", f"{path}.timestamp_granularities", message)


def check_transcript(value: Any, code: str, param: str) -> None:
    """The ``transcript`` extension: null or one of ``TRANSCRIPT_SOURCES``."""
    if value is not None and value not in TRANSCRIPT_SOURCES:
        shown = " or ".join(f"'{s}'" for s in TRANSCRIPT_SOURCES)
        raise ConfigError(code, f"'transcript' must be {shown}.", param)


def _check_turn(field: Field) -> None:
    td, path = field.value, field.path
    if not isinstance(td, dict):
        return
    if td["type"] == "semantic_vad":
        raise _fail(
            "not_supported",
            f"{path}.type",
            "turn_detection type 'semantic_vad' is not supported; use 'server_vad' or null.",
        )
    if td.get("idle_timeout_ms") is not None:
        raise _fail(
            "not_supported",
            f"{path}.idle_timeout_ms",
            "turn_detection.idle_timeout_ms is not supported.",
        )
    threshold = td.get("threshold")
    if threshold is not None and not 0 <= threshold <= 1:
        raise _fail("invalid_value", f"{path}.threshold")
    for key in ("prefix_padding_ms", "silence_duration_ms"):
        value = td.get(key)
        if value is not None and not 0 <= value <= MAX_MS:
            raise _fail("invalid_value", f"{path}.{key}")


def _merged(current: SessionConfig, u: Update, models: Models) -> SessionConfig:
    """SE-5: format/turn/noise replaced as units, transcription merged key by key."""
    changes: dict[str, Any] = {}
    if u.format.present:
        fmt = u.format.value or {"type": "audio/pcm"}
        default = DEFAULT_RATE if fmt["type"] == "audio/pcm" else G711_RATE
        changes.update(format=fmt["type"], rate=fmt.get("rate") or default)
    if u.transcription.present:
        changes.update(_transcription_changes(u.transcription.value, models))
    if u.turn_detection.present:
        td = u.turn_detection.value
        changes["turn_detection"] = TurnDetection(**turn_fields(td)) if td else None
    if u.noise_reduction.present:
        nr = u.noise_reduction.value
        changes["noise_reduction"] = dict(nr) if nr else None
    if u.include.present:
        inc = u.include.value
        changes["include"] = tuple(inc) if inc is not None else None
    return dataclasses.replace(current, **changes)


def _transcription_changes(t: Any, models: Models) -> dict[str, Any]:
    """SE-5: merged key by key; a key set to null, or ``transcription: null``, resets."""
    given = dict.fromkeys(TRANSCRIPTION_KEYS) if t is None else t
    defaults = {"model": models.served, "transcript": FINAL}
    changes: dict[str, Any] = {
        key: defaults.get(key) if given[key] is None else given[key]
        for key in TRANSCRIPTION_KEYS
        if key in given
    }
    if changes.get("timestamp_granularities") is not None:
        changes["timestamp_granularities"] = tuple(changes["timestamp_granularities"])
    return changes


def validate_update(
    session: Any, current: SessionConfig, models: Models, *, beta: bool = False
) -> SessionConfig:
    """The configuration after a GA or beta update, or ConfigError (SE-6, SE-9)."""
    shape: Callable[[Any], Update] = _beta_update if beta else _ga_update
    update = shape(session)
    _check_types(update)
    _check_values(update, models)
    return _merged(current, update, models)
