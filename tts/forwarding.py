"""Worker audio to the client (docs/specs/tts-ws.md E1–E6, Q8, TS1, tts U2; words: issue 35):
pure steps.

The worker owns the audio pipeline; the gateway adds the WAV header frame, forwards each chunk's
bytes unchanged, counts them (progress, ``complete``, the usage record) and acknowledges them.
Each function takes the active request and what the consumer observed, updates the request's
counters and returns the outputs for ``TtsConsumer.perform``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from tts.audio import wav_stream_header
from tts.events import Flushed, Words
from tts.messages import TtsAck, TtsChunk, TtsDone, TtsFlushed
from tts.outputs import Ack, Arm, Finish, Frame, Out, Send, SentTimer, ToWorker, TtsFail
from tts.session import ActiveRequest

logger = logging.getLogger(__name__)

TRANSPORT_POLL_S = 0.02  # how often a held ack looks at the socket's buffer again
SLOW_CLIENT_CLOSE = 1008  # a client that stopped reading breaks the stream's policy
INTERRUPTED = TtsFail("INTERNAL_ERROR", "Audio stream interrupted")


def audio(active: ActiveRequest, message: dict[str, Any]) -> list[Out]:
    """One audio message of the streaming job: a chunk, a flush mark or the end."""
    kind = message["type"]
    if kind == TtsChunk.TYPE:
        return chunk(active, TtsChunk.from_message(message))
    if kind == TtsFlushed.TYPE:
        return flushed(active, TtsFlushed.from_message(message))
    return done(active, TtsDone.from_message(message))


def header(active: ActiveRequest, model_version: str) -> list[Out]:
    """The header event, then the 44-byte streaming WAV header for ``wav`` (E1, E6)."""
    active.header_at = active.clock()
    outs: list[Out] = [Send(active.header_event(model_version, active.engine))]
    if active.request.format == "wav":
        outs += frame(active, wav_stream_header(active.request.sample_rate), samples=0)
    return outs


def frame(
    active: ActiveRequest,
    data: bytes,
    *,
    samples: int,
    ttfb_s: float | None = None,
    segment_chars: int = 0,
) -> list[Out]:
    """One binary frame, counted (U2), and progress after every N-th (E2)."""
    due = active.count_frame(len(data), samples, settings.TTS_PROGRESS_EVERY)
    outs: list[Out] = [Frame(data, samples, ttfb_s, segment_chars)]
    return [*outs, Send(active.progress_event())] if due else outs


def chunk(active: ActiveRequest, message: TtsChunk) -> list[Out]:
    """One worker chunk: its frame, with timestamps, progress and acks (Q8, TS1)."""
    if not active.chunks.take(message.seq):
        logger.error(
            "tts request %s: chunk gap at %d (expected %d, job %s)",
            active.request_id,
            message.seq,
            active.chunks.next_seq,
            message.job_id,
        )
        return [INTERRUPTED]
    acks: list[Out] = [Ack(message.seq)] if active.chunks.ack_due else []
    if message.epoch != active.epoch:  # audio of text cleared by the client (C2)
        return acks
    active.chunk_received(message.segment_seq, message.segment_end)
    stamps, seq = active.request.timestamps, message.segment_seq
    outs: list[Out] = []
    if stamps and message.segment_start:
        outs.append(Send(active.segment_start_event(seq)))
    if active.request.word_timestamps and message.words:
        before_ms = active.samples_sent * 1000 / active.request.sample_rate
        words = message.timed_words(before_ms)
        outs.append(Send(Words(request_id=active.request_id, seq=seq, words=words)))
    active.last_segment_seq = seq
    first = active.clock() - active.t0 if active.first_audio_at is None else None
    ended = active.spans.get(seq) if message.segment_end else None
    chars = ended.char_end - ended.char_start if ended is not None else 0
    outs += frame(
        active, message.data, samples=message.samples, ttfb_s=first, segment_chars=chars
    )
    if stamps and message.segment_end:
        outs.append(Send(active.segment_end_event(seq)))
    return outs + acks


def hold_ack(active: ActiveRequest, seq: int, *, transport_full: bool) -> list[Out]:
    """Q8: the ack goes out when the transport has taken what was sent; else it waits, so
    a client that stops reading pauses the worker instead of filling the gateway's memory
    (issue 9)."""
    active.ack_pending = seq
    if not transport_full:
        return release_ack(active)
    if active.ack_held_since is None:
        active.ack_held_since = active.clock()
        return [Arm("sent", TRANSPORT_POLL_S)]
    return []


def sent_timer(active: ActiveRequest, *, transport_full: bool) -> list[Out]:
    """The held ack goes out once the client has read; a stall fails the request."""
    if active.ack_pending is None or active.ack_held_since is None:
        return []
    if not transport_full:
        return release_ack(active)
    if active.clock() - active.ack_held_since > settings.TTS_CLIENT_STALL_S:
        return [
            TtsFail(
                "TIMEOUT", "Client stopped reading audio", close_code=SLOW_CLIENT_CLOSE
            )
        ]
    return [Arm("sent", TRANSPORT_POLL_S)]


def transport(
    step: Ack | SentTimer, active: ActiveRequest, *, transport_full: bool
) -> list[Out]:
    """A new ack to hold, or a held one to look at again, given the socket's buffer."""
    if isinstance(step, Ack):
        return hold_ack(active, step.seq, transport_full=transport_full)
    return sent_timer(active, transport_full=transport_full)


def release_ack(active: ActiveRequest) -> list[Out]:
    """The held ack, to the worker now."""
    seq, active.ack_pending, active.ack_held_since = active.ack_pending, None, None
    if seq is None:
        return []
    return [ToWorker("ack", lambda job: TtsAck(job_id=job, seq=seq), required=False)]


def flushed(active: ActiveRequest, message: TtsFlushed) -> list[Out]:
    """I4's ``flushed`` after the flushed text's audio."""
    return [Send(Flushed(request_id=active.request_id, flush_id=message.flush_id))]


def done(active: ActiveRequest, message: TtsDone) -> list[Out]:
    """Every frame is sent: complete the request (a gap is INTERNAL_ERROR, Q8)."""
    if not active.chunks.complete(message.chunks):
        return [INTERRUPTED]
    active.frames_dropped, active.truncated = message.frames_dropped, message.truncated
    active.snac_frames, active.tokens = message.snac_frames, message.tokens
    active.tokens_ignored = message.tokens_ignored
    return [Finish(cancelled=False)]
