"""The transcripts in ``docs/`` match a session recorded now on the real engines.

``UPDATE_PROTOCOL_DOCS=1`` rewrites the transcripts in the pages from this run instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.docs import registry as r
from tests.docs import transcripts as t

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = {
    "tts": "tts-protocol.md",
    "openai": "realtime-protocol.md",
    "vllm": "realtime-protocol.md",
}
SERVER_SECTIONS = {
    "tts": "Server events",
    "openai": "Server events (OpenAI dialect)",
    "vllm": "Server events (vLLM dialect)",
}
ENVELOPE = frozenset(("type", "event", "event_id"))


def paths(value: Any, prefix: str = "") -> set[str]:
    """Dotted paths of a JSON object's leaves (lists and scalars are leaves)."""
    out: set[str] = set()
    for key, child in value.items():
        path = f"{prefix}{key}"
        if isinstance(child, dict) and child:
            out |= paths(child, path + ".")
        else:
            out.add(path)
    return out


def undocumented(event: dict[str, Any], section: r.Section) -> list[str]:
    """The fields of ``event`` that the section's table names neither themselves, nor by
    an ancestor, nor (for an object sent as null) by a field inside them."""
    rows = set(section.first_column())
    missing = []
    for path in sorted(paths(event)):
        parts = path.split(".")
        prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
        inside = any(row.startswith(path + ".") for row in rows)
        if not (prefixes & (rows | ENVELOPE) or inside):
            missing.append(path)
    return missing


def check_fields(name: str, lines: list[t.Line]) -> None:
    """Every field a fresh session carries is in its event's table (and the session
    object's), on the page's client and server sides."""
    doc = r.page(PAGES[name])
    for side, item in lines:
        if not isinstance(item, dict):
            continue
        kind = t.kind(item)
        if side == "S→C":
            section = doc.child(SERVER_SECTIONS[name]).child(kind)
            session = item.get("session") if name == "openai" else None
            if isinstance(session, dict) and kind.startswith("session."):
                missing = undocumented(session, doc.child("Session object"))
                assert not missing, f"session object fields {missing} undocumented"
        else:
            section = doc.child("Client events").child(kind)
            if kind == "session.update":
                section = section.child(
                    "vLLM dialect" if name == "vllm" else "OpenAI dialect"
                )
        missing = undocumented(item, section)
        assert not missing, f"{name} {kind}: fields {missing} undocumented"


@pytest.fixture
async def real_worker(settings: Any) -> Any:
    """The embedded worker on Piper and faster-whisper."""
    from tests.conftest import running_worker

    settings.TTS_ENGINE = "piper"
    settings.ASR_ENGINE = "faster_whisper"
    async with running_worker() as runtime:
        yield runtime


async def test_docs_transcripts_match_a_fresh_session(
    real_worker: Any, api_key: str
) -> None:
    tts = await t.record_tts(api_key)
    openai = await t.record_openai(api_key, t.tts_speech(tts, 24000))
    vllm = await t.record_vllm(api_key, t.tts_speech(tts, 16000))
    await t.settle()
    fresh = {"tts": tts, "openai": openai, "vllm": vllm}
    if os.environ.get("UPDATE_PROTOCOL_DOCS"):
        for name, lines in fresh.items():
            path = DOCS / PAGES[name]
            path.write_text(t.replace_block(path.read_text(), name, t.render(lines)))
    for name, lines in fresh.items():
        check_fields(name, lines)
        documented = t.parse(t.block((DOCS / PAGES[name]).read_text(), name))
        assert t.shape(documented) == t.shape(lines), (
            f"docs/{PAGES[name]} transcript '{name}' drifted; rerun with "
            "UPDATE_PROTOCOL_DOCS=1 and review the diff:\n" + t.render(lines)
        )
