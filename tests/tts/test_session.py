"""Stream and request state (docs/specs/tts-ws.md E1–E3, K1–K3, X1, TS2): pure, with a fake clock."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from gateway.link.states import IllegalTransition, Transitions
from tts.events import server_message
from tts.protocol import TtsProtocolError, TtsRequest
from tts.session import (
    REQUEST_STATES,
    STREAM_STATES,
    RequestState,
    StreamState,
    TtsSession,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def session_with(clock: Clock) -> TtsSession:
    return TtsSession(stream_request_id=str(uuid.uuid4()), clock=clock)


def test_tts_x1_first_request_uses_the_accept_time_id_later_ones_get_new_ids() -> None:
    session = session_with(Clock())
    first = TtsRequest(text="a")
    assert session.request_id_for(first.request_id) == session.stream_request_id
    session.begin(
        first, request_id=session.request_id_for(first.request_id), voice="joe"
    )
    session.end_request()
    second = session.request_id_for()
    assert second != session.stream_request_id and uuid.UUID(second).version == 4
    assert session.request_id_for("mine") == "mine"


def test_tts_k2_k3_one_request_at_a_time_and_ids_unique_per_stream() -> None:
    session = session_with(Clock())
    session.begin(TtsRequest(text="a", keep_alive=True), request_id="r1", voice="joe")
    with pytest.raises(TtsProtocolError, match="already active"):
        session.begin(TtsRequest(text="b"), request_id="r2", voice="joe")
    session.end_request()
    with pytest.raises(TtsProtocolError, match="already used"):
        session.begin(TtsRequest(text="b"), request_id="r1", voice="joe")
    session.begin(TtsRequest(text="b"), request_id="r2", voice="joe")
    assert session.keep_alive is False  # K1: the latest request decides


def test_tts_e2_progress_after_every_tenth_frame_header_included() -> None:
    clock = Clock()
    session = session_with(clock)
    active = session.begin(TtsRequest(text="a"), request_id="r", voice="joe")
    due = [active.count_frame(44, 0, 10)]
    for _ in range(24):
        clock.now += 0.01
        due.append(active.count_frame(3200, 1600, 10))
    assert [i + 1 for i, d in enumerate(due) if d] == [10, 20]
    event = server_message(active.progress_event())
    assert event == {
        "event": "progress",
        "chunks_sent": 25,
        "bytes_sent": 44 + 24 * 3200,
        "elapsed_ms": 240,
        "request_id": "r",
        "audio_ms": 2400,
    }


def test_tts_e3_complete_metrics_definitions() -> None:
    clock = Clock()
    session = session_with(clock)
    active = session.begin(TtsRequest(text="hello"), request_id="r", voice="joe")
    active.text_chars = 5
    active.add_segments([(0, 0, 5)])
    clock.now += 0.0625  # binary-exact steps keep the integer ms exact
    active.header_at = clock()
    active.count_frame(44, 0, 10)
    clock.now += 0.125
    active.count_frame(32000, 16000, 10)  # first audio at t0 + 187.5 ms
    active.count_frame(7, 3, 10)
    clock.now += 0.25
    metrics = active.complete_metrics(cancelled=False, engine="piper")
    total, audio = 0.4375, 16003 / 16000
    assert metrics == {
        "request_id": "r",
        "chunks_sent": 3,
        "total_bytes": 44 + 32000 + 7,
        "audio_duration_seconds": round(audio, 2),
        "total_time_seconds": round(total, 2),
        "ttfb_ms": 187,
        "rtf": round(total / audio, 3),
        "cancelled": False,
        "queue_wait_ms": 62,
        "text_chars": 5,
        "segments": 1,
        "sample_rate": 16000,
        "format": "wav",
        "speaker": "joe",
        "engine": "piper",
        "frames_dropped": 0,
        "truncated": False,
        "snac_frames": 0,
        "tokens": 0,
        "tokens_ignored": 0,
    }


def test_tts_e3_no_audio_means_zero_ttfb_and_rtf() -> None:
    session = session_with(Clock())
    active = session.begin(TtsRequest(text="a"), request_id="r", voice="joe")
    metrics = active.complete_metrics(cancelled=True, engine="piper")
    assert (metrics["ttfb_ms"], metrics["rtf"], metrics["cancelled"]) == (0, 0, True)


def test_tts_ts2_segment_positions_are_audio_sent() -> None:
    session = session_with(Clock())
    active = session.begin(
        TtsRequest(text="One two. Three four.", timestamps=True),
        request_id="r",
        voice="joe",
    )
    active.add_segments([(0, 0, 8), (1, 8, 20)])
    assert active.segment_start_event(0).start_ms == 0
    active.count_frame(8000, 4000, 10)
    end0 = active.segment_end_event(0).end_ms
    start1 = active.segment_start_event(1)
    assert end0 == start1.start_ms == 250
    assert (start1.text, start1.char_start, start1.char_end) == (
        " Three four.",
        8,
        20,
    )


def moves(table: Transitions[Any]) -> set[tuple[str, str]]:
    kind = table.kind
    return {(a.name, b.name) for a in kind for b in kind if table.allows(a, b)}


def test_tts_17_request_states_only_move_forward() -> None:
    assert moves(REQUEST_STATES) == {
        ("SUBMITTING", "STREAMING"),
        ("SUBMITTING", "DONE"),  # ended before its header (cancel, error)
        ("STREAMING", "DONE"),
    }
    state = REQUEST_STATES.move(RequestState.SUBMITTING, RequestState.STREAMING)
    with pytest.raises(IllegalTransition):
        REQUEST_STATES.move(state, RequestState.SUBMITTING)


def test_a_stream_closes_once() -> None:
    assert moves(STREAM_STATES) == {("OPEN", "CLOSED")}
    with pytest.raises(IllegalTransition):
        STREAM_STATES.move(StreamState.CLOSED, StreamState.CLOSED)


def test_a_request_ends_once_its_stream_ends_it() -> None:
    session = TtsSession()
    session.begin(TtsRequest(text="Hi."), request_id="r1", voice="v")
    session.end_request()
    session.end_request()  # already done: no second move
    assert session.active is not None and session.active.state is RequestState.DONE
