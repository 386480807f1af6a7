"""``GET /v1/models`` and ``GET /v1/models/{id}``, as the SDK's ``models.list()`` reads them,
and ``GET /v1/audio/voices`` (as vllm-omni serves it): the TTS voices ``/v1/tts/speakers``
lists, each with its model (an id of ``/v1/models``), engine, language and sample rate."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found

from accounts.admission import authenticate_request
from accounts.exceptions import AdmissionDenied
from gateway.logs import request_id_of
from openai_rest.catalog import OWNER, ServedModel, served_models
from openai_rest.errors import OpenAiError, denial_error, error_response
from tts.speakers import voices_listing

CREATED = 1_735_689_600  # 2025-01-01: the models have no creation time of their own


def model_object(model: ServedModel) -> dict[str, object]:
    """One ``model`` object; ``kind`` and ``alias_of`` are additive fields."""
    return {
        "id": model.id,
        "object": "model",
        "created": CREATED,
        "owned_by": OWNER,
        "kind": model.kind,
        "alias_of": model.alias_of,
    }


def _authenticated(
    request: HttpRequest, endpoint: str | None = None
) -> JsonResponse | None:
    try:
        authenticate_request(request, endpoint=endpoint)
    except AdmissionDenied as denied:
        return error_response(denial_error(denied), request_id_of(request))
    return None


@require_GET
def models(request: HttpRequest) -> JsonResponse:
    """The served TTS and ASR models, with every alias."""
    refused = _authenticated(request)
    if refused is not None:
        return refused
    data = [model_object(m) for m in served_models()]
    return JsonResponse({"object": "list", "data": data})


@require_GET
def model(request: HttpRequest, model_id: str) -> JsonResponse:
    """One served model, or 404 in OpenAI's shape."""
    refused = _authenticated(request)
    if refused is not None:
        return refused
    for served in served_models():
        if served.id == model_id:
            return JsonResponse(model_object(served))
    error = OpenAiError(
        404,
        f"The model '{model_id[:64]}' does not exist.",
        param="model",
        code="model_not_found",
    )
    return error_response(error, request_id_of(request))


@require_GET
def voices(request: HttpRequest) -> JsonResponse:
    """The TTS voices: ``data`` as OpenAI lists, ``voices`` (their ids) as vllm-omni."""
    refused = _authenticated(request, endpoint="tts")
    if refused is not None:
        return refused
    listing = voices_listing()
    data = [
        {
            "id": speaker["id"],
            "object": "voice",
            "name": speaker["name"],
            "language": (speaker["languages"] or [None])[0],
            "languages": speaker["languages"],
            "sample_rate": listing["native_sample_rate"],
            "engine": listing["engine"],
            "model": listing["model_version"],
            "default": speaker["default"],
            "aliases": speaker["aliases"],
        }
        for speaker in listing["speakers"]
    ]
    return JsonResponse(
        {"object": "list", "data": data, "voices": [v["id"] for v in data]}
    )


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 (``handler404``): OpenAI's envelope under ``/v1/``, Django's page elsewhere."""
    if not request.path.startswith("/v1/"):
        return page_not_found(request, exception)  # type: ignore[arg-type]
    path = request.path[:200]
    shown = (
        f" ({request.method} {path})" if path.isascii() and path.isprintable() else ""
    )
    error = OpenAiError(404, f"Invalid URL{shown}.", code="unknown_url")
    return error_response(error, request_id_of(request))
