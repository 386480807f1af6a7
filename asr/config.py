"""Session configuration of ``/v1/realtime``: validation of updates and the echoed object.

``validate_update`` runs the SE-9 checks in their order on a GA ``session.update`` or (with
beta paths) a ``transcription_session.update`` and returns the new configuration without
touching the old one (SE-6: atomic). ``validate_vllm_update`` does the same for vLLM's flat
update (VL-2). ``session_object`` and ``beta_session_object`` are the echoes (SE-1, SE-12).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asr.audio import G711_RATE, INPUT_RATES, InputFormat

LOGPROBS_INCLUDE = "item.input_audio_transcription.logprobs"
DEFAULT_RATE = 24_000
VLLM_RATE = 16_000
NOISE_TYPES = ("near_field", "far_field")
BETA_FORMATS = {
    "pcm16": "audio/pcm",
    "g711_ulaw": "audio/pcmu",
    "g711_alaw": "audio/pcma",
}
BETA_FORMAT_NAMES = {v: k for k, v in BETA_FORMATS.items()}
MAX_MS = 10_000  # SE-9 row 12
# ISO-639-1 codes of Whisper's languages (openai/whisper tokenizer.py LANGUAGES).
WHISPER_LANGUAGES = frozenset(
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu "
    "ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn "
    "bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn "
    "mt sa lb my bo tl mg as tt ln ha ba jw su".split()
)

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
                ("model", "language", "prompt", "languages", "keywords", "delay")
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
    "input_audio_transcription": {"model": None, "language": None, "prompt": None},
    "turn_detection": TURN_KEYS,
    "input_audio_noise_reduction": {"type": None},
}


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

    @property
    def logprobs(self) -> bool:
        """Whether deltas carry logprobs (IT-10)."""
        return LOGPROBS_INCLUDE in (self.include or ())


@dataclass(frozen=True)
class Models:
    """What the served model accepts: names (SE-15) and languages (row 8)."""

    served: str
    aliases: tuple[str, ...]
    english_only: bool

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
        turn_detection=TurnDetection(**_turn_fields(turn)) if turn else None,
    )


def _turn_fields(turn: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(TurnDetection)}
    return {k: v for k, v in turn.items() if k in names and v is not None}


# Validation (SE-9).


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
        for key in ("model", "language", "prompt"):
            _expect(t.get(key), f"{path}.{key}", str)
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
        value = u.include.value
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise _fail("invalid_value", u.include.path)


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
    for key in ("languages", "keywords", "delay"):
        if t.get(key) is not None:
            raise _fail("not_supported", f"{path}.{key}", f"'{key}' is not supported.")
    _check_turn(u.turn_detection)
    nr = u.noise_reduction.value
    if isinstance(nr, dict) and nr.get("type") not in NOISE_TYPES:
        raise _fail("invalid_value", f"{u.noise_reduction.path}.type")
    if isinstance(u.include.value, list) and any(
        v != LOGPROBS_INCLUDE for v in u.include.value
    ):
        raise _fail("invalid_value", u.include.path)


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
        t = u.transcription.value
        if t is None:
            changes.update(model=models.served, language=None, prompt=None)
        else:
            for key in ("model", "language", "prompt"):
                if key in t:
                    changes[key] = t[key]
            if "model" in t and t["model"] is None:
                changes["model"] = models.served
    if u.turn_detection.present:
        td = u.turn_detection.value
        changes["turn_detection"] = TurnDetection(**_turn_fields(td)) if td else None
    if u.noise_reduction.present:
        nr = u.noise_reduction.value
        changes["noise_reduction"] = dict(nr) if nr else None
    if u.include.present:
        inc = u.include.value
        changes["include"] = tuple(inc) if inc is not None else None
    return dataclasses.replace(current, **changes)


def validate_update(
    session: Any, current: SessionConfig, models: Models, *, beta: bool = False
) -> SessionConfig:
    """The configuration after a GA or beta update, or ConfigError (SE-6, SE-9)."""
    shape: Callable[[Any], Update] = _beta_update if beta else _ga_update
    update = shape(session)
    _check_types(update)
    _check_values(update, models)
    return _merged(current, update, models)


def validate_vllm_update(
    event: Mapping[str, Any], current: SessionConfig, models: Models
) -> SessionConfig:
    """vLLM's ``session.update{model, language?, prompt?, include?}`` (VL-2)."""
    if "model" not in event or event["model"] is None:
        raise ConfigError("invalid_event", "Missing required field: model", "model")
    model = event["model"]
    if not isinstance(model, str):
        raise ConfigError("invalid_event", "Field 'model' must be a string.", "model")
    if not models.allowed(model):
        shown = model if len(model) <= 96 else model[:93] + "..."
        raise ConfigError(
            "model_not_found", f"The model `{shown}` does not exist.", "model"
        )
    include = event.get("include")
    if include is not None and not (
        isinstance(include, list) and all(v == LOGPROBS_INCLUDE for v in include)
    ):
        raise ConfigError(
            "invalid_event",
            f"Invalid include: only '{LOGPROBS_INCLUDE}' is supported.",
            "include",
        )
    language = event.get("language")
    if language is not None and not models.language_ok(language):
        raise ConfigError("invalid_event", "Invalid language.", "language")
    prompt = event.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise ConfigError("invalid_event", "Field 'prompt' must be a string.", "prompt")
    return dataclasses.replace(
        current,
        model=model,
        language=language,
        prompt=prompt,
        include=tuple(include) if include is not None else None,
    )


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
                "transcription": {
                    "model": config.model,
                    "language": config.language,
                    "prompt": config.prompt,
                },
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
        "input_audio_transcription": {
            "model": config.model,
            "language": config.language,
            "prompt": config.prompt,
        },
        "turn_detection": config.turn_detection.echo()
        if config.turn_detection
        else None,
        "input_audio_noise_reduction": config.noise_reduction,
        "include": list(config.include) if config.include is not None else None,
        "modalities": ["text"],
    }
