"""The OpenAPI document: valid OpenAPI 3.1, served at /v1/openapi.json, and it names every
REST route of the URL configuration (and nothing else). Live responses are checked against it
in tests/openai_rest/test_openapi_live.py."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

from veena_site.openapi import openapi_document

# REST routes outside the document: the document itself, Prometheus text, HTML pages.
NOT_API = ("v1/openapi.json", "metrics")
HTML = ("", "favicon.ico")
HTML_TREES = ("docs/", "dashboard/", "playground/", "admin/")


def routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    """Every route of the URL configuration, with converters as OpenAPI path parameters."""
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if route in HTML or route.startswith(HTML_TREES):
            continue
        if isinstance(entry, URLResolver):
            yield from routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route


def as_openapi(route: str) -> str:
    """``v1/models/<path:model_id>`` → ``/v1/models/{model}`` (the document's name)."""
    return "/" + re.sub(r"<(?:\w+:)?model_id>", "{model}", route)


def test_the_document_is_valid_openapi_3_1() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    validate(document, cls=OpenAPIV31SpecValidator)


def test_it_is_served_without_a_key() -> None:
    response = Client().get("/v1/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == openapi_document()


def test_every_rest_route_is_described_and_nothing_else() -> None:
    rest = {
        as_openapi(r) for r in routes(get_resolver().url_patterns) if r not in NOT_API
    }
    assert set(openapi_document()["paths"]) == rest


def test_post_v1_tts_fields_are_the_protocols() -> None:
    from tts.protocol import REST_EXCLUDED_FIELDS, TtsRequest
    from tts.request_fields import REQUEST_FIELDS

    schema = openapi_document()["components"]["schemas"]["TtsRequest"]
    fields = set(REQUEST_FIELDS) - set(REST_EXCLUDED_FIELDS)
    assert set(schema["properties"]) == fields
    defaults = {f.name: f.default for f in dataclasses.fields(TtsRequest)}
    for name, prop in schema["properties"].items():
        if "default" in prop:
            assert prop["default"] == defaults[name], name


@pytest.mark.parametrize("cap", [1000, 20])
def test_caps_are_this_servers(settings: Any, cap: int) -> None:
    settings.OPENAI_SPEECH_MAX_INPUT_CHARS = cap
    schema = openapi_document()["components"]["schemas"]["SpeechRequest"]
    assert schema["properties"]["input"]["maxLength"] == cap


def keys_of(schema: dict[str, Any]) -> dict[str, Any]:
    """The nested property names of an object schema (through ``anyOf`` with null)."""
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "object":
            return {k: keys_of(v) for k, v in option.get("properties", {}).items()}
    return {}


def within(keys: dict[str, Any], accepted: dict[str, Any] | None, path: str) -> None:
    for key, children in keys.items():
        assert accepted is not None and key in accepted, f"{path}.{key}"
        if children:
            within(children, accepted[key], f"{path}.{key}")


def test_client_secret_sessions_name_only_keys_the_server_accepts() -> None:
    from asr.updates import GA_SCHEMA
    from tts.pins import SESSION_KEYS

    schemas = openapi_document()["components"]["schemas"]
    realtime = schemas["RealtimeClientSecretRequest"]["properties"]["session"]
    within(keys_of(realtime), GA_SCHEMA, "session")
    tts = schemas["TtsClientSecretRequest"]["properties"]["session"]
    assert set(keys_of(tts)) == set(SESSION_KEYS)
    assert set(schemas["TtsClientSecret"]["properties"]["session"]["properties"]) == (
        set(SESSION_KEYS)
    )


def test_transcription_schemas_are_the_sdks_models() -> None:
    """verbose_json and the stream events name the fields of the openai SDK's models, and
    every field those models require (``TranscriptionVerbose`` is validated strictly)."""
    from openai.types.audio import (
        TranscriptionSegment,
        TranscriptionTextDeltaEvent,
        TranscriptionTextDoneEvent,
        TranscriptionVerbose,
        TranscriptionWord,
    )

    schemas = openapi_document()["components"]["schemas"]
    verbose = schemas["VerboseTranscription"]
    segment = verbose["properties"]["segments"]["items"]
    word = verbose["properties"]["words"]["items"]
    pairs = [
        (verbose, TranscriptionVerbose),
        (segment, TranscriptionSegment),
        (word, TranscriptionWord),
        (schemas["TranscriptTextDeltaEvent"], TranscriptionTextDeltaEvent),
        (schemas["TranscriptTextDoneEvent"], TranscriptionTextDoneEvent),
    ]
    for schema, model in pairs:
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        assert required <= set(schema["required"]), model.__name__
        assert set(schema["properties"]) - {"task"} <= set(model.model_fields)
    assert set(segment["required"]) == set(TranscriptionSegment.model_fields)


def test_every_event_stream_names_its_events() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    streams = [
        content["text/event-stream"]
        for item in document["paths"].values()
        for operation in item.values()
        for answer in operation["responses"].values()
        if "text/event-stream" in (content := answer.get("content", {}))
    ]
    assert len(streams) == 2  # speech (stream_format sse) and transcriptions (stream)
    for stream in streams:
        names = [r["$ref"].rsplit("/", 1)[1] for r in stream["x-events"]["oneOf"]]
        assert names and all(name in schemas for name in names)
        consts = [schemas[n]["properties"]["type"]["const"] for n in names]
        assert len(set(consts)) == len(consts)
