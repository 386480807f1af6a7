"""The multipart form of ``POST /v1/audio/transcriptions``, validated.

Fields: ``file`` (required), ``model`` (``ASR_MODEL`` or an alias), ``language`` (ISO-639-1;
English-only models take only ``en``), ``prompt`` (at most ``ASR_MAX_PROMPT_CHARS``),
``temperature`` (0–1, accepted and ignored: decoding is greedy), ``response_format`` (``json``,
``text``, ``srt``, ``vtt``, ``verbose_json``), ``stream`` (``true``: SSE). Other fields
(``include[]``, ``chunking_strategy``) are accepted and ignored. ``timestamp_granularities[]``
with ``word`` adds ``words`` to ``verbose_json`` (where the engine times words); segments are
always given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Literal

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError

from asr.config import Models
from openai_rest.catalog import asr_models
from openai_rest.errors import OpenAiError, invalid

TranscriptFormat = Literal["json", "text", "srt", "vtt", "verbose_json"]
TRANSCRIPT_FORMATS: tuple[TranscriptFormat, ...] = (
    "json",
    "text",
    "srt",
    "vtt",
    "verbose_json",
)

FORM_OVERHEAD = 64 * 1024  # the form's other fields and boundaries, beyond the file


@dataclass(frozen=True)
class TranscriptionRequest:
    """A validated transcription request; ``file`` is the upload, still unread."""

    file: IO[bytes] = field(repr=False)
    model: str
    language: str | None
    prompt: str = field(repr=False)
    response_format: TranscriptFormat
    stream: bool
    words: bool = False  # timestamp_granularities[] has "word"


def too_large() -> OpenAiError:
    """413 for an upload over ``OPENAI_TRANSCRIBE_MAX_BYTES``."""
    mib = settings.OPENAI_TRANSCRIBE_MAX_BYTES / (1024 * 1024)
    return OpenAiError(
        413,
        f"Maximum content size limit ({mib:g} MiB) exceeded.",
        param="file",
        code="file_too_large",
    )


def check_length(request: HttpRequest) -> None:
    """Refuse a body over the cap by its ``Content-Length`` before parsing it."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.OPENAI_TRANSCRIBE_MAX_BYTES + FORM_OVERHEAD:
        raise too_large()


def parse_transcription(request: HttpRequest) -> TranscriptionRequest:
    """Parse and validate the form (sync: Django's multipart parser)."""
    if not (request.content_type or "").startswith("multipart/form-data"):
        raise invalid("The request must be multipart/form-data.")
    if not request.META.get("CONTENT_LENGTH"):
        # A chunked body (the npm SDK streams its form): Django's multipart parser reads
        # nothing without a length, so measure the body (already spooled by the server).
        if len(request.body) > settings.OPENAI_TRANSCRIBE_MAX_BYTES + FORM_OVERHEAD:
            raise too_large()
        request.META["CONTENT_LENGTH"] = str(len(request.body))
    try:
        post, files = request.POST, request.FILES
    except (MultiPartParserError, RequestDataTooBig, TooManyFieldsSent):
        raise invalid("The multipart body could not be parsed.") from None
    upload = files.get("file")
    if upload is None:
        raise invalid("Missing required parameter: 'file'.", param="file")
    if upload.size is not None and upload.size > settings.OPENAI_TRANSCRIBE_MAX_BYTES:
        raise too_large()
    models = served()
    model = post.get("model")
    if not model:
        raise invalid("Missing required parameter: 'model'.", param="model")
    if not models.allowed(model):
        names = [m.id for m in asr_models()]
        raise invalid(
            f"Invalid model '{model[:64]}'. Models: {', '.join(names)}.",
            param="model",
            code="model_not_found",
        )
    language = post.get("language") or None
    if language is not None and not models.language_ok(language):
        raise invalid(
            f"Unsupported language '{language[:16]}' for model '{model[:64]}'.",
            param="language",
            code="unsupported_language",
        )
    prompt = post.get("prompt") or ""
    if not models.prompt_ok(prompt):
        raise invalid("'prompt' is too long.", param="prompt")
    _temperature(post.get("temperature"))
    return TranscriptionRequest(
        file=upload,
        model=model,
        language=language or ("en" if models.english_only else None),
        prompt=prompt,
        response_format=_format(post.get("response_format")),
        stream=_boolean(post.get("stream")),
        words=_granularities(
            post.getlist("timestamp_granularities[]")
            + post.getlist("timestamp_granularities")
        ),
    )


def served() -> Models:
    """What the served ASR model accepts (as the realtime socket's ``models()``)."""
    return Models(
        served=settings.ASR_MODEL,
        aliases=tuple(settings.ASR_MODEL_ALIASES),
        english_only=settings.ASR_MODEL.endswith(".en"),
        max_prompt_chars=settings.ASR_MAX_PROMPT_CHARS,
    )


def _format(value: str | None) -> TranscriptFormat:
    if not value:
        return "json"
    for known in TRANSCRIPT_FORMATS:
        if value == known:
            return known
    raise invalid(
        f"Unsupported response_format '{value[:32]}'. "
        f"Supported: {', '.join(TRANSCRIPT_FORMATS)}.",
        param="response_format",
        code="invalid_value",
    )


def _temperature(value: str | None) -> None:
    if value in (None, ""):
        return
    try:
        number = float(value)
    except ValueError:
        raise invalid("'temperature' must be a number.", param="temperature") from None
    if not 0.0 <= number <= 1.0:
        raise invalid("'temperature' must be between 0 and 1.", param="temperature")


def _granularities(values: list[str]) -> bool:
    """True when words are asked for; each value is ``word`` or ``segment``."""
    for value in values:
        if value not in ("word", "segment"):
            raise invalid(
                "'timestamp_granularities' values must be 'word' or 'segment'.",
                param="timestamp_granularities",
            )
    return "word" in values


def _boolean(value: str | None) -> bool:
    if value in (None, "", "false", "False", "0"):
        return False
    if value in ("true", "True", "1"):
        return True
    raise invalid("'stream' must be true or false.", param="stream")
