"""State of one realtime session in the gateway: pure dataclasses, no I/O (STYLE 6).

``RealtimeSession`` owns the protocol state of AR-1: dialect, configuration, item ids and
boundaries, the retained audio of every unfinished item (the WK-7 copy) and the IT-5 order of
transcription events. The signal (decoder, VAD, turns, the session clock) is the front end's
(``asr.front_end``): the session places what it heard in items, trimming non-speech and
splitting server-VAD turns. Its methods return plain *outputs* (what to tell the worker, what
to tell the client) that the consumer performs.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from asr.config import SessionConfig
from asr.front_end import (
    SAMPLES_PER_MS,
    START_FRAMES,
    Heard,
    SpeechStart,
    Turn,
)
from asr.messages import AsrDelta, AsrFinal, AsrResync
from asr.outputs import (
    Committed,
    Completed,
    Delta,
    Drop,
    Failed,
    Forward,
    Item,
    ItemOptions,
    OpenItem,
    Out,
    Overflow,
    SpeechStarted,
    SpeechStopped,
    WorkerCommit,
    words_from_item_start,
)
from asr.protocol import Dialect, new_id
from asr.vad import FRAME
from asr.whisper import MODEL_RATE
from gateway.contracts import JobFailed

MIN_FORWARD = MODEL_RATE // 5  # WK-4: audio goes to the worker in 200–500 ms chunks
MAX_FORWARD = MODEL_RATE // 2


class AsrState(enum.Enum):
    """Lifecycle of a connection; CLOSED is terminal."""

    ADMITTING = enum.auto()
    OPEN = enum.auto()
    CLOSED = enum.auto()


@dataclass
class RealtimeSession:
    """Everything the gateway knows about one connection."""

    config: SessionConfig
    dialect: Dialect = Dialect.UNDETERMINED
    beta: bool = False
    precommit_deltas: bool = True
    max_samples: int = 60 * MODEL_RATE
    max_pending_samples: int = 300 * MODEL_RATE
    session_id: str = field(default_factory=lambda: new_id("sess_"))
    state: AsrState = AsrState.ADMITTING
    model_validated: bool = False  # vLLM: a session.update succeeded (VL-3)
    generating: bool = False  # vLLM: a non-final commit started the item (VL-4)
    previous_item_id: str | None = None
    pending: deque[Item] = field(default_factory=deque)
    created_at: float = field(default_factory=time.time)  # the accept time (CN-7)
    expires_at: int = 0  # CN-8, set once admitted

    def __post_init__(self) -> None:
        self._seq = 0
        self.current = self._new_item(0)

    # Configuration.

    @property
    def stream(self) -> bool:
        """Whether the worker should stream pre-commit deltas (WK-3)."""
        if self.dialect is Dialect.VLLM:
            return self.generating
        return self.precommit_deltas

    def configure(self, config: SessionConfig) -> list[Out]:
        """Apply a validated configuration (SE-8); options of open items may change."""
        old_logprobs = self.config.logprobs
        self.config = config
        if config.logprobs != old_logprobs:
            return self._reopen(logprobs=config.logprobs)
        return []

    def start_generation(self) -> list[Out]:
        """vLLM non-final commit: stream the current item from now on (VL-4)."""
        if self.generating:
            return []
        self.generating = True
        return self._reopen()

    def _reopen(self, logprobs: bool | None = None) -> list[Out]:
        item = self.current
        if item.options is not None and logprobs is not None:
            item.options = replace(item.options, logprobs=logprobs)
        return [OpenItem(item, self.stream)] if item.opened else []

    # Audio.

    def ingest(self, heard: Heard) -> list[Out]:
        """Place what the front end heard: its audio in the current item, its turns."""
        item = self.current
        if item.options is None:
            item.options = self._options()
        if not heard.trim and not item.speech:
            item.speech, item.buf_start = True, item.boundary
        item.input_ms += heard.input_ms
        item.buf.extend(heard.pcm)
        outs: list[Out] = []
        for turn in heard.turns:
            outs += self._turn(turn, heard)
        item = self.current
        if not item.speech:
            self._trim(item, heard)
        outs += self._forward(item, final=False)
        if item.retained > self.max_samples:
            outs.append(Overflow())
        elif self.unfinished_samples() > self.max_pending_samples:
            outs.append(Overflow(pending=True))
        return outs

    def unfinished_samples(self) -> int:
        """Retained audio of every item not finished yet (issue 9: bounded per session)."""
        pending = sum(i.retained for i in self.pending if not i.finished)
        return pending + self.current.retained

    def _options(self) -> ItemOptions:
        c = self.config
        return ItemOptions(
            c.language, c.prompt or "", c.logprobs, c.transcript, c.words
        )

    def _turn(self, turn: Turn, heard: Heard) -> list[Out]:
        item = self.current
        if isinstance(turn, SpeechStart):
            start = max(turn.at - heard.pad, item.boundary, item.buf_start)
            if not item.speech:
                del item.buf[: 2 * (start - item.buf_start)]
                item.buf_start, item.speech = start, True
            return (
                [SpeechStarted(item, start // SAMPLES_PER_MS)]
                if heard.server_vad
                else []
            )
        if not heard.server_vad:
            return []
        outs: list[Out] = [SpeechStopped(item, turn.at // SAMPLES_PER_MS)]
        keep = 2 * (turn.at - item.buf_start)
        rest = bytes(item.buf[keep:])
        del item.buf[keep:]
        if item.retained > self.max_samples:
            return [*outs, Overflow()]
        outs += self._commit_at(turn.at)
        new = self.current
        new.options = self._options()
        new.buf.extend(rest)
        new.buf_start = turn.at
        new.input_ms = (heard.end - turn.at) / SAMPLES_PER_MS
        if not heard.trim:
            new.speech = True
        return outs

    def _trim(self, item: Item, heard: Heard) -> None:
        """Before speech keep only the padding plus the undecided frames (AI-7, VD-7)."""
        undecided = heard.end - heard.decided
        keep = heard.pad + (START_FRAMES + 1) * FRAME + max(0, undecided)
        excess = len(item.buf) // 2 - keep
        if excess > 0:
            del item.buf[: 2 * excess]
            item.buf_start += excess
        if item.buf_start < item.boundary:
            item.buf_start = item.boundary

    def _forward(self, item: Item, *, final: bool) -> list[Out]:
        """Chunks of retained audio not yet sent, 200–500 ms each (WK-4)."""
        if not item.speech:
            return []
        outs: list[Out] = []
        if not item.opened and (item.retained > item.sent or final):
            item.opened = True
            outs.append(OpenItem(item, self.stream))
        while True:
            pending = item.retained - item.sent
            if pending <= 0 or (pending < MIN_FORWARD and not final):
                return outs
            n = min(pending, MAX_FORWARD)
            pcm = bytes(item.buf[2 * item.sent : 2 * (item.sent + n)])
            outs.append(Forward(item, item.sent, pcm))
            item.sent += n

    # Commit and clear.

    def commit_ready(self, min_ms: int) -> float | None:
        """The accepted ms of the current item when below ``min_ms`` (IT-4), else None."""
        ms = self.current.input_ms
        return ms if ms < min_ms else None

    def commit(self, clock: int) -> list[Out]:
        """Commit the current item at the session clock (IT-2, VD-6, VL-5)."""
        return self._commit_at(clock)

    def _commit_at(self, point: int) -> list[Out]:
        item = self.current
        outs = self._forward(item, final=True) if item.retained else []
        item.commit_point, item.committed_at = point, time.monotonic()
        item.previous_item_id = self.previous_item_id
        self.previous_item_id = item.item_id
        self.pending.append(item)
        self.current = self._new_item(point)
        self.generating = False
        outs.append(Committed(item))
        if item.opened:
            outs.append(WorkerCommit(item, item.retained))
            return outs
        asked = item.options is not None and item.options.words
        words: list[dict[str, Any]] | None = [] if asked else None
        return outs + self._finish(item, Completed(item, "", words=words))

    def clear(self, clock: int) -> list[Out]:
        """Drop the current item (IT-14); the next one starts at the session clock."""
        item = self.current
        self.current = self._new_item(clock)
        return [Drop(item)] if item.opened else []

    def _new_item(self, boundary: int) -> Item:
        self._seq += 1
        return Item(
            seq=self._seq,
            item_id=new_id("item_"),
            boundary=boundary,
            buf_start=boundary,
        )

    # Worker replies.

    def on_delta(self, delta: AsrDelta) -> list[Out]:
        """gpu.asr.delta: confirmed words of an unfinished item."""
        item = self.find(delta.item_seq)
        return self.delta(item, delta.text, delta.logprobs) if item else []

    def on_final(self, f: AsrFinal) -> list[Out]:
        """gpu.asr.final: the remainder of a committed, unfinished item, then its
        transcript: the final decode's, or with the "deltas" option every delta joined."""
        item = self.find(f.item_seq)
        if item is None or item.commit_point is None:
            return []
        outs = self.delta(item, f.text, f.logprobs)
        logprobs: list[dict[str, Any]] | None
        if f.transcript is None:  # the "deltas" option: every delta joined
            transcript, logprobs = item.emitted, item.logprobs
        else:
            transcript, logprobs = f.transcript, f.transcript_logprobs
        tokens = (f.prompt_tokens, f.completion_tokens)
        words = words_from_item_start(f.words, item)
        done = Completed(item, transcript, *tokens, logprobs, words)
        return outs + self._finish(item, done)

    def on_resync(self, resync: AsrResync) -> list[Out]:
        """gpu.asr.resync: resend an item's audio from what the worker has (WK-6)."""
        item = self.find(resync.item_seq)
        return self.resend(item, resync.have_samples) if item else []

    def on_failed(self, failed: JobFailed) -> list[Out] | None:
        """gpu.job.failed: the outputs of a failed final decode (IT-12); None when the
        failure is not one item's (the session ends or fails over)."""
        seq = failed.item_seq
        item = self.find(seq) if seq is not None else None
        if failed.stage != "final" or item is None:
            return None
        return self.failed(item)

    def find(self, seq: int) -> Item | None:
        """The unfinished item with this seq (committed or current)."""
        if self.current.seq == seq:
            return self.current
        return next((i for i in self.pending if i.seq == seq and not i.finished), None)

    def delta(
        self, item: Item, text: str, logprobs: list[dict[str, Any]] | None
    ) -> list[Out]:
        """Text the worker confirmed; delivered in IT-5 order."""
        if not text:
            return []
        item.emitted += text
        item.logprobs += logprobs or []
        return self._deliver(item, [Delta(item, text, logprobs)])

    def failed(self, item: Item) -> list[Out]:
        """The final decode failed (IT-12)."""
        return self._finish(item, Failed(item))

    def _finish(self, item: Item, out: Completed | Failed) -> list[Out]:
        item.finished = True
        item.buf = bytearray()
        return self._deliver(item, [out])

    def _head(self) -> Item:
        return self.pending[0] if self.pending else self.current

    def _deliver(self, item: Item, outs: list[Out]) -> list[Out]:
        """IT-5: events of an item wait until every earlier item is done."""
        item.held += outs
        ready: list[Out] = []
        while True:
            head = self._head()
            ready += head.held
            head.held = []
            if not (head.finished and self.pending and head is self.pending[0]):
                return ready
            self.pending.popleft()

    # Failover (WK-7) and resync (WK-6).

    def replay(self) -> list[Out]:
        """Rebuild a new worker's state: every unfinished opened item, from the start."""
        outs: list[Out] = []
        for item in [*self.pending, self.current]:
            if item.finished or not item.opened:
                continue
            item.sent = 0
            outs.append(OpenItem(item, self.stream if item is self.current else False))
            outs += self._forward(item, final=True)
            if item.commit_point is not None:
                outs.append(WorkerCommit(item, item.retained))
        return outs

    def resend(self, item: Item, have: int) -> list[Out]:
        """Resend an item's audio from ``have`` (gpu.asr.resync)."""
        sent, item.sent = item.sent, min(have, item.sent)
        outs: list[Out] = []
        while item.sent < sent:
            n = min(sent - item.sent, MAX_FORWARD)
            outs.append(
                Forward(
                    item,
                    item.sent,
                    bytes(item.buf[2 * item.sent : 2 * (item.sent + n)]),
                )
            )
            item.sent += n
        return outs
