"""Worker audio to the client for the TTS consumer (specs/tts-ws.md E1–E6, Q8, TS1, tts U2).

The worker owns the audio pipeline; the gateway adds the WAV header frame, forwards each chunk's
bytes unchanged, counts them (progress, ``complete``, the usage record) and acknowledges them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings

from gateway import metrics
from gateway.daphne_compat import TRANSPORT_EXTENSION
from tts.audio import wav_stream_header
from tts.messages import TtsAck, TtsChunk, TtsDone, TtsFlushed, ack_interval
from tts.prepare import engine_info
from tts.session import ActiveRequest, RequestState

if TYPE_CHECKING:
    from tts.consumers import TtsConsumer

logger = logging.getLogger(__name__)

TRANSPORT_POLL_S = 0.02  # how often a held ack looks at the socket's buffer again
SLOW_CLIENT_CLOSE = 1008  # a client that stopped reading breaks the stream's policy


class AudioOutput:
    """The consumer's output side: header, frames with progress, and worker audio messages."""

    def __init__(self, consumer: TtsConsumer) -> None:
        self.consumer = consumer

    def streaming(self, message: dict[str, Any]) -> bool:
        """True when ``message`` belongs to the job of the request now streaming."""
        consumer = self.consumer
        if consumer.link is None or not consumer.link.touch(message):
            return False
        return consumer.session.busy and consumer.active.state is RequestState.STREAMING

    async def send_header(self, active: ActiveRequest, model_version: str) -> None:
        """Send the header event, then the 44-byte streaming WAV header for ``wav`` (E6)."""
        active.header_at = self.consumer.session.clock()
        await self.consumer.send_json(
            active.header_event(model_version, engine_info().wire_name)
        )
        if active.request.format == "wav":
            await self.send_frame(
                wav_stream_header(active.request.sample_rate), samples=0
            )

    async def send_frame(self, data: bytes, *, samples: int) -> None:
        """Send one binary frame, count it (U2) and send progress after every N-th (E2)."""
        consumer = self.consumer
        active = consumer.active
        await consumer.send(bytes_data=data)
        consumer.usage.audio_sent(samples, active.request.sample_rate)
        if active.count_frame(len(data), samples, settings.TTS_PROGRESS_EVERY):
            await consumer.send_json(active.progress_event())

    async def on_chunk(self, message: dict[str, Any]) -> None:
        """One worker chunk: forward its frame, with timestamps, progress and acks (Q8)."""
        if not self.streaming(message):
            return
        consumer = self.consumer
        chunk, active = TtsChunk.from_message(message), consumer.active
        if chunk.seq != active.next_chunk_seq:
            logger.error(
                "tts request %s: chunk gap at %d (expected %d, job %s)",
                active.request_id,
                chunk.seq,
                active.next_chunk_seq,
                chunk.job_id,
            )
            await consumer.fail("INTERNAL_ERROR", "Audio stream interrupted")
            return
        active.next_chunk_seq += 1
        ack_due = active.next_chunk_seq % ack_interval(settings.TTS_CHUNK_WINDOW) == 0
        if chunk.epoch != active.epoch:  # audio of text cleared by the client (C2)
            if ack_due:
                await self.ack(chunk.seq)
            return
        active.chunk_received(chunk.segment_seq, chunk.segment_end)
        stamps = active.request.timestamps
        if stamps and chunk.segment_start:
            await consumer.send_json(active.segment_start_event(chunk.segment_seq))
        active.last_segment_seq = chunk.segment_seq
        if active.first_audio_at is None:
            metrics.TTFB.labels("tts").observe(consumer.session.clock() - active.t0)
        await self.send_frame(chunk.data, samples=chunk.samples)
        if stamps and chunk.segment_end:
            await consumer.send_json(active.segment_end_event(chunk.segment_seq))
        if ack_due:
            await self.ack(chunk.seq)

    def transport_full(self) -> bool:
        """More than ``TTS_SEND_BUFFER_BYTES`` wait unsent in the socket's buffer."""
        probe = self.consumer.scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
        return probe is not None and probe.buffered() > settings.TTS_SEND_BUFFER_BYTES

    async def ack(self, seq: int) -> None:
        """Q8: acknowledge chunks up to ``seq`` once the transport has taken what was sent,
        so a client that stops reading pauses the worker instead of filling the gateway's
        memory (issue 9)."""
        active = self.consumer.active
        active.ack_pending = seq
        if not self.transport_full():
            await self._send_ack()
        elif active.ack_held_since is None:
            active.ack_held_since = self.consumer.session.clock()
            self.consumer.timers.arm("sent", TRANSPORT_POLL_S)

    async def on_sent_timer(self) -> None:
        """The held ack goes out once the client has read; a stall fails the request."""
        consumer, active = self.consumer, self.consumer.active
        if active.ack_pending is None or active.ack_held_since is None:
            return
        if not self.transport_full():
            await self._send_ack()
        elif (
            consumer.session.clock() - active.ack_held_since
            > settings.TTS_CLIENT_STALL_S
        ):
            await consumer.fail(
                "TIMEOUT", "Client stopped reading audio", close_code=SLOW_CLIENT_CLOSE
            )
        else:
            consumer.timers.arm("sent", TRANSPORT_POLL_S)

    async def _send_ack(self) -> None:
        consumer, active = self.consumer, self.consumer.active
        seq, active.ack_pending, active.ack_held_since = active.ack_pending, None, None
        if seq is not None and consumer.link is not None:
            await consumer.link.send(TtsAck(job_id=consumer.link.job_id, seq=seq))

    async def on_flushed(self, message: dict[str, Any]) -> None:
        """I4's ``flushed`` after the flushed text's audio."""
        if self.streaming(message):
            flushed = TtsFlushed.from_message(message)
            await self.consumer.send_json(
                {
                    "event": "flushed",
                    "request_id": self.consumer.active.request_id,
                    "flush_id": flushed.flush_id,
                }
            )

    async def on_done(self, message: dict[str, Any]) -> None:
        """Every frame is sent: complete the request (a gap is INTERNAL_ERROR, Q8)."""
        if not self.streaming(message):
            return
        consumer = self.consumer
        done, active = TtsDone.from_message(message), consumer.active
        if done.chunks != active.next_chunk_seq:
            await consumer.fail("INTERNAL_ERROR", "Audio stream interrupted")
            return
        active.frames_dropped, active.truncated = done.frames_dropped, done.truncated
        active.snac_frames, active.tokens = done.snac_frames, done.tokens
        active.tokens_ignored = done.tokens_ignored
        await consumer.flow.complete(cancelled=False)
