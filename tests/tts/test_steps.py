"""The stream's pure steps (docs/specs/tts-ws.md Q8, K2, R9, X3, E2, TS1): no socket, no worker.

``tts.steps``, ``tts.forwarding`` and ``tts.messages.ChunkOrder`` decide; these tests read the
output records they return, as ``TtsConsumer.perform`` would.
"""

from __future__ import annotations

from gateway.link.budget import ControlBudget
from tts import forwarding, steps
from tts.events import Error, Pong, Progress, ServerWarning, server_message
from tts.messages import ChunkOrder, TtsChunk, TtsDone, ack_interval
from tts.outputs import Ack, Finish, Frame, Send, Start, TtsFail
from tts.protocol import Cancel, Ping, TtsRequest
from tts.session import TtsSession


def test_tts_q8_chunk_order_counts_without_gaps_and_acks_every_interval() -> None:
    order = ChunkOrder(window=32)
    due = []
    for seq in range(16):
        assert order.take(seq)
        due.append(order.ack_due)
    assert [i for i, d in enumerate(due) if d] == [7, 15]  # every 8th (ack_interval)
    assert not order.take(17) and order.next_seq == 16  # a gap counts nothing
    assert order.complete(16) and not order.complete(17)
    assert ChunkOrder(window=4).take(0) and ack_interval(4) == 2


def test_tts_q8_a_chunk_gap_or_a_short_done_is_internal_error() -> None:
    active = TtsSession().begin(TtsRequest(text="a"), request_id="r", voice="v")
    chunk = TtsChunk(job_id="j", seq=1, segment_seq=0, data=b"\0\0", samples=1)
    assert forwarding.chunk(active, chunk) == [
        TtsFail("INTERNAL_ERROR", "Audio stream interrupted")
    ]
    done = TtsDone(job_id="j", samples=0, chunks=1, engine_ms=0)
    assert forwarding.done(active, done) == [
        TtsFail("INTERNAL_ERROR", "Audio stream interrupted")
    ]
    assert forwarding.done(
        active, TtsDone(job_id="j", samples=0, chunks=0, engine_ms=0)
    )[-1] == Finish(cancelled=False)


def test_tts_e2_forwarded_frames_are_counted_and_acked_after_they_are_sent() -> None:
    session = TtsSession()
    active = session.begin(
        TtsRequest(text="a"), request_id="r", voice="v", chunk_window=2
    )
    chunk = TtsChunk(job_id="j", seq=0, segment_seq=0, data=b"\0\0", samples=1)
    outs = forwarding.chunk(active, chunk)
    assert isinstance(outs[0], Frame) and outs[0].ttfb_s is not None
    assert outs[-1] == Ack(0)  # ack_interval(2) == 1: after the frame
    assert active.chunks_sent == 1 and active.samples_sent == 1


def test_tts_k2_r9_client_events_become_output_records() -> None:
    session = TtsSession()
    budget = ControlBudget(rate=1.0, burst=1)
    assert steps.client_event(session, Ping(), budget) == [Send(Pong())]
    limited = steps.client_event(session, Ping(), budget)
    assert isinstance(limited[0], TtsFail) and limited[0].code == "RATE_LIMIT_EXCEEDED"
    req = TtsRequest(text="a", request_id="one")
    assert steps.client_event(session, req, budget) == [Start(req)]
    session.begin(req, request_id="one", voice="v")
    [second] = steps.client_event(
        session, TtsRequest(text="b", request_id="two"), budget
    )
    assert second == Send(
        Error("VALIDATION_ERROR", "A request is already active", "two", fatal=False)
    )
    budget.tokens = 1.0
    assert steps.client_event(session, Cancel("other"), budget) == [
        Send(ServerWarning("NOT_ACTIVE", "No such active request", "other"))
    ]


def test_tts_3_server_events_leave_out_absent_fields() -> None:
    progress = Progress(
        chunks_sent=1, bytes_sent=2, elapsed_ms=3, request_id="r", audio_ms=4
    )
    assert "segment_seq" not in server_message(progress)
    assert server_message(ServerWarning("IGNORED_MESSAGE", "m")) == {
        "event": "warning",
        "code": "IGNORED_MESSAGE",
        "message": "m",
    }
    assert server_message(Pong()) == {"event": "pong"}
