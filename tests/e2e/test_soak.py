"""The soak harness (issue 17): its checker catches bad streams, and a short soak is clean.

The checker tests feed ``bench/soak.py``'s TTS request loop a scripted socket. The soak test runs
the harness itself against an embedded ``manage.py serve`` with the fake engines and default
settings: 50 sockets (TTS and realtime mixed, 1 s between a socket's requests) for 60 s, failing
on any lost, duplicated or out-of-order chunk, any error (50 sockets fit the slots, so not even
a capacity refusal), or the server's RSS in the last window above the window after warm-up by
over 30 %. ``make test`` runs it (issue 17: CI runs a short soak).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env

SOCKETS = 50
SECONDS = 60
RSS_BOUND = 1.30


def load_soak() -> Any:
    spec = importlib.util.spec_from_file_location("soak", ROOT / "bench" / "soak.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Scripted:
    """A socket that answers any request with the given messages."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = list(messages)

    async def send(self, _: str) -> None:
        return None

    async def recv(self) -> Any:
        return self.messages.pop(0)


def stream(frames: list[bytes], *, counted: int | None = None, seqs=(0,)) -> list[Any]:
    """Header, segment events, ``frames``, progress at 10, complete counting ``counted``."""
    out: list[Any] = [json.dumps({"event": "header"})]
    for seq in seqs:
        out.append(json.dumps({"event": "segment_start", "seq": seq}))
    for n, frame in enumerate(frames, 1):
        out.append(frame)
        if n == 10:
            out.append(json.dumps({"event": "progress", "chunks_sent": 10}))
    for seq in seqs:
        out.append(json.dumps({"event": "segment_end", "seq": seq}))
    n = len(frames) if counted is None else counted
    size = sum(len(f) for f in frames)
    metrics = {"chunks_sent": n, "total_bytes": size}
    out.append(json.dumps({"event": "complete", "metrics": metrics}))
    return out


def check(messages: list[Any]) -> Any:
    import asyncio

    soak = load_soak()
    tally = soak.Tally(started=time.monotonic(), window_s=10.0, fake=False)
    assert asyncio.run(soak.tts_request(Scripted(messages), tally, "hello"))
    return tally


def test_soak_checker_passes_a_clean_stream() -> None:
    tally = check(stream([b"\0\0" * 100] * 12))
    assert (tally.lost, tally.duplicated, tally.out_of_order) == (0, 0, 0)
    assert tally.frames == 12 and not tally.errors


def test_soak_checker_counts_lost_and_duplicated_frames() -> None:
    assert check(stream([b"\0\0"] * 11, counted=12)).lost == 1
    assert check(stream([b"\0\0"] * 13, counted=12)).duplicated == 1
    # Before the 10th frame's progress: 11 arrived where the server had sent 10.
    messages = stream([b"\0\0"] * 12)
    messages.insert(3, b"\0\0")
    assert check(messages).duplicated == 1


def test_soak_checker_counts_out_of_order_frames_and_segments() -> None:
    messages = stream([b"\0\0"] * 3)
    messages.insert(1, b"\0\0")  # a frame before its segment started
    assert check(messages).out_of_order >= 1
    assert check(stream([b"\0\0"] * 3, seqs=(1,))).out_of_order >= 1
    assert check(stream([b"\0"] * 3)).out_of_order == 3  # odd-length frames


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.e2e
def test_soak_short_run_is_clean(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py")]
        + ["--sockets", str(SOCKETS), "--seconds", str(SECONDS), "--think", "1"]
        + ["--json", str(out)],
        cwd=ROOT,
        # Default answer and admission times: a starved CPU once read as MODEL_NOT_LOADED
        # here and the test raised them to 5 s; a late answer is now load, and the worker
        # no longer waits on the database thread (gateway.dispatch).
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
    )
    print(done.stdout[-4000:], done.stderr[-4000:])
    result = json.loads(out.read_text())
    assert result["tts_requests"] > SOCKETS and result["rt_sessions"] > 0
    assert (result["lost"], result["duplicated"], result["out_of_order"]) == (0, 0, 0)
    assert result["errors"] == {}
    assert all(w["tts_requests"] for w in result["windows"]), "a window with no TTS"
    assert result["rss_growth"] <= RSS_BOUND, result["windows"][-1]["rss_kib"]
    assert done.returncode == 0
