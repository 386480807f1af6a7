"""docs/tts-protocol.md and docs/realtime-protocol.md name exactly what the code has.

Every event, request field (with its default and limits), error and warning code, close code
and protocol setting (with its default) of the code must be in its page's table, and the
tables must not name one the code lacks. The sets come from the code (``tests.docs.registry``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from typing import Any

import pytest

from tests.docs import registry as r
from tests.docs.registry import Section


@pytest.fixture(scope="module")
def tts_page() -> Section:
    return r.page("tts-protocol.md")


@pytest.fixture(scope="module")
def rt_page() -> Section:
    return r.page("realtime-protocol.md")


def names(section: Section) -> set[str]:
    """The names of a section's subsections."""
    return {child.name for child in section.children}


def same(documented: Any, code: Any, what: str) -> None:
    documented, code = set(documented), set(code)
    assert documented == code, (
        f"{what}: missing from the docs {sorted(code - documented)}; "
        f"documented but not in the code {sorted(documented - code)}"
    )


def table(section: Section) -> dict[str, list[str]]:
    """A section's table rows by their first backticked name."""
    return {name: row for row in section.rows() if (name := r.backticked(row[0]))}


def literal(cell: str) -> Any:
    """The first backticked token of a cell as a JSON value (bare words as strings)."""
    token = r.backticked(cell)
    assert token is not None, cell
    try:
        return json.loads(token)
    except ValueError:
        return token


def number(value: object) -> str:
    """A limit as the docs write it: floats without a trailing ``.0``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_settings(section: Section, code_names: set[str]) -> None:
    """The settings table lists the settings the code reads, with their defaults and
    whether an operator sets them (the registry's kind)."""
    from veena_site.conf.registry import SETTINGS

    rows = table(section)
    same(rows, code_names, "settings")
    module = importlib.import_module("veena_site.settings")
    kinds = {"env": "environment", "constant": "constant"}
    for name, row in rows.items():
        assert row[3].strip() == kinds[SETTINGS.settings[name].kind], name
        if name in os.environ:
            continue  # set for this run; the default is not observable
        value = getattr(module, name)
        documented = literal(row[1])
        assert documented == value, f"{name}: documented {documented!r}, code {value!r}"


# TTS.


def test_docs_tts_client_events(tts_page: Section) -> None:
    from tts.protocol import CLIENT_EVENTS

    same(names(tts_page.child("Client events")), CLIENT_EVENTS, "tts client events")


def test_docs_tts_request_fields_defaults_and_limits(tts_page: Section) -> None:
    from tts.protocol import MAX_TEXT_CHARS, TtsRequest
    from tts.request_fields import REQUEST_FIELDS

    rows = table(tts_page.child("Client events").child("request"))
    same(rows, REQUEST_FIELDS, "tts request fields")
    defaults = {f.name: f.default for f in dataclasses.fields(TtsRequest)}
    for name, row in rows.items():
        if name != "text":
            assert literal(row[2]) == defaults[name], f"default of {name}: {row[2]}"
    limits = r.field_limits("tts/request_fields.py")
    assert {"temperature", "max_tokens", "seed", "speed"} <= set(limits)
    for name, (lo, hi) in limits.items():
        span = f"{number(lo)}–{number(hi)}"
        assert span in rows[name][3], f"limits of {name}: {rows[name][3]}"
    assert f"1–{MAX_TEXT_CHARS}" in rows["text"][3]


def test_docs_tts_server_events(tts_page: Section) -> None:
    from tts.events import SERVER_EVENTS

    code = r.dict_events(r.TTS_MODULES, "event") | set(SERVER_EVENTS)
    same(names(tts_page.child("Server events")), code, "tts server events")


def test_docs_tts_error_codes_close_codes_and_statuses(tts_page: Section) -> None:
    from tts.protocol import CLOSE_CODES, HTTP_STATUS, NON_FATAL_CODES

    rows = table(tts_page.child("Errors"))
    raised = r.call_codes(r.TTS_MODULES, r.ERROR_CALLS | {"Error", "TtsFail"})
    same(rows, set(CLOSE_CODES) | raised, "tts error codes")
    for code, row in rows.items():
        assert literal(row[1]) == CLOSE_CODES[code], f"close of {code}: {row[1]}"
        assert literal(row[2]) == HTTP_STATUS[code], f"status of {code}: {row[2]}"
        fatal = "no" if code in NON_FATAL_CODES else "yes"
        assert row[3].startswith(fatal), f"fatality of {code}: {row[3]}"


def test_docs_tts_warning_codes(tts_page: Section) -> None:
    same(
        table(tts_page.child("Warnings")),
        r.call_codes(r.TTS_MODULES, frozenset({"warn", "ServerWarning"})),
        "tts warnings",
    )


def test_docs_tts_close_codes(tts_page: Section) -> None:
    from tts.errors import DENIAL_CLOSE_CODES
    from tts.protocol import CLOSE_CODES

    code = (
        r.close_codes(r.TTS_MODULES)
        | set(CLOSE_CODES.values())
        | set(DENIAL_CLOSE_CODES.values())
    )
    same({int(n) for n in table(tts_page.child("Close codes"))}, code, "tts closes")


def test_docs_tts_settings(tts_page: Section) -> None:
    check_settings(
        tts_page.child("Limits and settings"), r.settings_read(r.TTS_MODULES)
    )


# Realtime.


def test_docs_realtime_client_events(rt_page: Section) -> None:
    from asr.protocol import OPENAI_EVENTS, VLLM_EVENTS

    section = rt_page.child("Client events")
    same(names(section), set(OPENAI_EVENTS) | set(VLLM_EVENTS), "realtime events")
    for name in set(OPENAI_EVENTS) - set(VLLM_EVENTS):
        assert "OpenAI dialect only" in section.child(name).text, name


def test_docs_realtime_session_update_fields(rt_page: Section) -> None:
    from asr.protocol import ClientEvent, VllmSessionUpdate
    from asr.updates import BETA_SCHEMA, GA_SCHEMA

    events = rt_page.child("Client events")
    update = events.child("session.update")
    same(
        table(update.child("OpenAI dialect")),
        r.leaves(GA_SCHEMA, "session"),
        "session.update fields",
    )
    same(
        table(update.child("vLLM dialect")),
        set(VllmSessionUpdate.model_fields) - set(ClientEvent.model_fields),
        "vLLM session.update fields",
    )
    same(
        table(events.child("transcription_session.update")),
        r.leaves(BETA_SCHEMA, "session"),
        "transcription_session.update fields",
    )


def test_docs_realtime_server_events(rt_page: Section) -> None:
    from asr.event_schema import BETA_EVENTS, SERVER_EVENTS, VllmEvent

    same(
        names(rt_page.child("Server events (OpenAI dialect)")),
        set(SERVER_EVENTS) | set(BETA_EVENTS),
        "OpenAI-dialect server events",
    )
    vllm = {
        model.model_fields["type"].default
        for model in VllmEvent.__subclasses__()
        if "type" in model.model_fields
    }
    # session.created is the OpenAI frame, sent in both dialects (CN-7).
    same(
        names(rt_page.child("Server events (vLLM dialect)")),
        vllm | {"session.created"},
        "vLLM-dialect server events",
    )


def realtime_error_codes() -> set[str]:
    from asr import errors
    from asr.errors import CLOSE_CODES, ERROR_TYPES, FAILED_ERROR

    return (
        r.call_codes(r.ASR_MODULES, r.ERROR_CALLS)
        | set(CLOSE_CODES)
        | set(ERROR_TYPES)
        | {code for code, _ in errors.DENIALS.values()}
        | set(errors.STOPS.values())
        | {str(FAILED_ERROR["code"])}
    )


def test_docs_realtime_error_codes_types_and_closes(rt_page: Section) -> None:
    from asr.errors import CLOSE_CODES, ERROR_TYPES

    rows = table(rt_page.child("Errors"))
    same(rows, realtime_error_codes(), "realtime error codes")
    for code, row in rows.items():
        if r.backticked(row[1]) is not None:
            kind = ERROR_TYPES.get(code, "invalid_request_error")
            assert literal(row[1]) == kind, f"type of {code}: {row[1]}"
        close = CLOSE_CODES.get(code)
        if close is None:
            assert row[2] == "—", f"{code} does not close: {row[2]}"
        else:
            assert literal(row[2]) == close, f"close of {code}: {row[2]}"


def test_docs_realtime_close_codes(rt_page: Section) -> None:
    from asr.errors import CLOSE_CODES

    code = r.close_codes(r.ASR_MODULES) | set(CLOSE_CODES.values())
    same({int(n) for n in table(rt_page.child("Close codes"))}, code, "asr closes")


def test_docs_realtime_settings(rt_page: Section) -> None:
    check_settings(rt_page.child("Limits and settings"), r.settings_read(r.ASR_MODULES))


def test_docs_pages_are_linked_from_the_readme() -> None:
    readme = (r.ROOT / "README.md").read_text()
    for name in ("docs/tts-protocol.md", "docs/realtime-protocol.md"):
        assert f"]({name})" in readme, name


def json_block(section: Section) -> Any:
    """The first ```json block of a section, parsed."""
    text = section.text.split("```json", 1)[1].split("```", 1)[0]
    return json.loads(text)


def test_docs_tts_speakers_example_is_the_piper_listing(tts_page: Section) -> None:
    from tts.engine_info import engine_info as info_of
    from tts.speakers import speakers_listing

    documented = json_block(tts_page.child("GET /v1/tts/speakers"))
    assert documented == speakers_listing(info_of("piper"), ready=True)


def test_docs_tts_rest_names_the_websocket_only_fields(tts_page: Section) -> None:
    from tts.protocol import REST_EXCLUDED_FIELDS

    text = tts_page.child("POST /v1/tts").text
    for name in REST_EXCLUDED_FIELDS:
        assert f"`{name}`" in text, name
