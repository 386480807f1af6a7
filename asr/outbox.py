"""The realtime consumer's queue of messages for its pinned worker, and its failover state.

Session outputs for the worker become ``asr.job.*`` messages here and leave in order; a full
worker channel (``ChannelFull``) keeps them queued to retry, and a queue blocked past the stall
limit means the worker is lost (WK-7). While failing over nothing is queued: the replay to the
new worker rebuilds its state.
"""

from __future__ import annotations

import enum
import time
from collections import deque

from asr.messages import AsrAudio, AsrCommit, AsrDrop, AsrItemOpen
from asr.outputs import Forward, OpenItem, WorkerCommit, WorkerOut
from gateway.contracts import Message
from gateway.link.jobclient import WorkerLink

RETRY_S = 0.05  # ChannelFull: the consumer retries the queue after this


def worker_message(out: WorkerOut, job_id: str) -> Message:
    """The ``asr.job.*`` message of a worker output, for the job ``job_id``."""
    item = out.item
    if isinstance(out, OpenItem):
        assert item.options is not None
        return AsrItemOpen(
            job_id=job_id,
            item_seq=item.seq,
            language=item.options.language,
            prompt=item.options.prompt,
            stream=out.stream,
            prefix_text=item.emitted,
            logprobs=item.options.logprobs,
            words=item.options.words,
            transcript=item.options.transcript,
        )
    if isinstance(out, Forward):
        return AsrAudio(
            job_id=job_id, item_seq=item.seq, offset=out.offset, pcm=out.pcm
        )
    if isinstance(out, WorkerCommit):
        return AsrCommit(job_id=job_id, item_seq=item.seq, total_samples=out.total)
    return AsrDrop(job_id=job_id, item_seq=item.seq)


class FlushResult(enum.Enum):
    """What a flush left: nothing, a blocked queue to retry, or a stalled worker."""

    DONE = enum.auto()
    RETRY = enum.auto()
    STALLED = enum.auto()


class WorkerOutbox:
    """Messages not yet accepted by the worker's channel, oldest first."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.queue: deque[Message] = deque()
        self.full_since: float | None = None  # monotonic, while the channel is full
        self.failing_over = False
        self.failovers = 0
        self.audio_messages = 0
        self.pcm_bytes = 0

    def job_id(self, stream_id: str) -> str:
        """The job's name: the stream id (WK-1), with the failover's number after one, so
        a cancel sent to the lost worker can never reach the job that replaces it."""
        return f"{stream_id}.f{self.failovers}" if self.failovers else stream_id

    def put(self, out: WorkerOut, job_id: str) -> None:
        """Queue the message of one output for the job (none while failing over)."""
        if self.failing_over:
            return
        if isinstance(out, Forward):
            self.audio_messages += 1
            self.pcm_bytes += len(out.pcm)
        self.queue.append(worker_message(out, job_id))

    def fail_over(self) -> bool:
        """Start a failover: drop the queue; False when one is already running."""
        if self.failing_over:
            return False
        self.failing_over = True
        self.failovers += 1
        self.clear()
        return True

    def clear(self) -> None:
        """Forget every queued message."""
        self.queue.clear()
        self.full_since = None

    async def flush(self, link: WorkerLink) -> FlushResult:
        """Send queued messages in order until the channel is full or the queue empty."""
        while self.queue and not self.failing_over:
            if not await link.send(self.queue[0]):
                now = time.monotonic()
                self.full_since = self.full_since or now
                stalled = now - self.full_since > self.stall_s
                return FlushResult.STALLED if stalled else FlushResult.RETRY
            self.queue.popleft()
            self.full_since = None
        return FlushResult.DONE

    def describe(self) -> str:
        """What went to the workers, for the close log line."""
        return f"{self.audio_messages} audio messages, {self.pcm_bytes} pcm bytes"
