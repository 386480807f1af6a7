"""Counts in client messages agree with their nouns (issue 32: "1 second", not "1 seconds"),
and a concurrency refusal names the cap that was full, on every protocol."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from accounts.exceptions import AdmissionDenied, StreamCap
from asr import errors as asr_errors
from gateway.wording import count, retry_after
from openai_rest.errors import denial_error as rest_denial
from tests.conftest import ROOT
from tts.errors import denial_error as tts_denial
from tts.events import rate_limit_message

# Apps whose strings reach clients (wire errors, REST bodies, form errors on pages).
CLIENT_PACKAGES = ("tts", "asr", "openai_rest", "gateway", "accounts")
NOUNS = (
    "seconds|minutes|hours|days|streams|sessions|requests|characters|bytes|keys|items"
    "|attempts|events|messages|samples|chunks|words|frames|tokens|times"
)
# A placeholder followed by a plural noun: "{n} seconds", "{limit:g} bytes", "%d streams".
HAND_MADE = re.compile(rf"(\{{[^{{}}]*\}}|%[-\d.]*[dfgs]) ?({NOUNS})\b")
# Text that never reaches a client: log lines and debugging forms.
NOT_FOR_CLIENTS = {"describe", "__repr__", "__str__"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [
        (1, "second", "1 second"),
        (1.0, "second", "1 second"),
        (2, "second", "2 seconds"),
        (1.5, "second", "1.5 seconds"),
        (0.25, "second", "0.25 seconds"),
        (0, "stream", "0 streams"),
        (1, "stream", "1 stream"),
        (1_048_576, "byte", "1,048,576 bytes"),
        (2, "child", "2 children"),
    ],
)
def test_count_agrees_with_its_noun(n: float, noun: str, text: str) -> None:
    plural = "children" if noun == "child" else None
    assert count(n, noun, plural) == text


def test_retry_hints_round_up_to_whole_seconds() -> None:
    assert retry_after(1) == "Retry after 1 second."
    assert retry_after(1000) == "Retry after 1 second."
    assert retry_after(1001) == "Retry after 2 seconds."
    assert rate_limit_message(1000) == "Rate limit exceeded. Retry after 1 second."


@pytest.mark.parametrize(
    ("cap", "tts", "realtime", "rest"),
    [
        (
            StreamCap(2),
            "Stream limit reached: 2 streams at once on this plan. "
            "Retry after 1 second.",
            "Session limit reached: 2 sessions at once on this plan. "
            "Retry after 1.0 s.",
            "Concurrency limit reached: 2 requests at once on this plan. "
            "Please try again later.",
        ),
        (
            StreamCap(1, per_key=True),
            "Stream limit reached: 1 stream at once for this key. "
            "Retry after 1 second.",
            "Session limit reached: 1 session at once for this key. Retry after 1.0 s.",
            "Concurrency limit reached: 1 request at once for this key. "
            "Please try again later.",
        ),
    ],
)
def test_a_concurrency_refusal_names_the_cap(cap, tts, realtime, rest, settings):
    settings.TTS_OVERLOAD_RETRY_MS = 1000
    denied = AdmissionDenied("too_many_streams", cap=cap)
    assert tts_denial(denied) == ("RATE_LIMIT_EXCEEDED", tts, 1000)
    fail = asr_errors.denial(denied.reason, denied.retry_after_ms, denied.cap)
    assert (fail.code, fail.text, fail.retry_after_ms) == (
        "too_many_sessions",
        realtime,
        1000,
    )
    error = rest_denial(denied)
    assert (error.status, error.message) == (429, rest)


def hand_made_plurals(path: Path) -> list[str]:
    """Strings of ``path`` that put a plural noun after a number placeholder."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        quiet = (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in NOT_FOR_CLIENTS
        ) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOG_METHODS
        )
        if quiet:
            skip.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                "{}" if isinstance(part, ast.FormattedValue) else str(part.value)
                for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if HAND_MADE.search(text):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text!r}")
    return found


def test_no_client_message_makes_its_own_plural() -> None:
    """The class, not the one message: every such count goes through ``count``."""
    found = [
        hit
        for package in CLIENT_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for hit in hand_made_plurals(path)
    ]
    assert found == []


def test_the_scan_finds_a_hand_made_plural(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("tests.gateway.test_wording.ROOT", tmp_path)
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(n):\n"
        "    logger.info(f'{n} seconds')\n"
        "    return f'Retry after {n} seconds.', 'at most {n} characters', '%d streams'\n"
    )
    assert len(hand_made_plurals(sample)) == 3
