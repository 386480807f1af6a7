"""When a worker item decodes, and which decode its final may reuse (realtime SA-2, SA-7).

``WorkerItem`` is one item's audio and decoding state in the worker; ``Cadence`` holds the decode
settings of a job and answers, from an item's state and the decode gate, whether a chunk
decode is due, whether one started now is a likely final (issue 13: the decode of the pause
after the speech), and whether the last one can stand in for the final decode.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings

from asr.messages import AsrItemOpen
from asr.whisper import MODEL_RATE
from asr.worker.engines.base import AsrHypothesis
from asr.worker.gate import DecodeGate
from asr.worker.streaming import DecodePlan, WordStreamState


@dataclass
class WorkerItem:
    """One item's audio and decoding state in the worker."""

    seq: int
    options: AsrItemOpen
    state: WordStreamState
    pcm: bytearray = field(default_factory=bytearray)
    commit_total: int | None = None
    decoded_at: int = 0  # samples when the last chunk decode started
    speech_end: int = 0  # end of the last audio above the silence threshold
    # The last chunk decode that finished: its hypothesis, plan and the samples it covered.
    last_chunk: tuple[AsrHypothesis, DecodePlan, int] | None = None
    # The chunk decode in flight started after speech ended: a likely final (issue 13).
    speculative: bool = False
    resync_pending: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    chunk: asyncio.Task[AsrHypothesis] | None = None
    task: asyncio.Task[None] | None = None

    @property
    def samples(self) -> int:
        """Samples buffered so far."""
        return len(self.pcm) // 2

    def audio(self, start: int) -> np.ndarray:
        """The item's audio from sample ``start`` as float32 in [-1, 1)."""
        pcm = np.frombuffer(self.pcm, dtype="<i2")[start:]
        return pcm.astype(np.float32) / 32768.0


class Cadence:
    """A job's decode settings (``ASR_*``) and the decisions that read them."""

    def __init__(self, gate: DecodeGate) -> None:
        self.gate = gate
        self.reuse = settings.ASR_FINAL_REUSE
        self.pause_samples = int(settings.ASR_PAUSE_DECODE_S * MODEL_RATE)
        chunk_s = min(settings.ASR_CHUNK_MIN_S, settings.ASR_CHUNK_S)
        self.idle_chunk_samples = int(chunk_s * MODEL_RATE)
        self.first_words = settings.ASR_CHUNK_MIN_FIRST_WORDS

    def chunk_due(self, item: WorkerItem) -> bool:
        """A chunk of new audio, or a pause after speech the last decode did not cover.

        While no other decode runs, ``ASR_CHUNK_MIN_S`` of new audio is a chunk (issue 13).
        Audio that is all silence since the last decode started is never one: decoding it
        adds no word, and a decode still running at the commit would delay the completed
        event (at a 0.3 s cadence, by 0.3 s on average).
        """
        if item.decoded_at >= item.speech_end:
            return self._full_decode_of_pause_due(item)
        new = item.samples - item.decoded_at
        if new >= item.state.chunk_samples:
            return True
        gate_idle = self.gate.idle(final=False) and self.gate.idle(final=True)
        first = self.first_words and not item.state.emitted
        if new >= self.idle_chunk_samples and (
            gate_idle or (first and self.gate.free(final=False))
        ):
            return True
        return self.after_pause(item)

    def _full_decode_of_pause_due(self, item: WorkerItem) -> bool:
        """The speech ended inside the last chunk decode, which had a short encoder context
        (``ASR_CHUNK_CONTEXT_S``), and a pause follows: decode it once more with the full
        context, at final priority, so the commit can complete from that decode (issue 13)."""
        last = item.last_chunk
        return last is not None and not last[0].full_context and self.may_be_final(item)

    def after_pause(self, item: WorkerItem) -> bool:
        """``ASR_PAUSE_DECODE_S`` of silence follows the item's speech."""
        return (
            self.pause_samples > 0
            and item.samples - item.speech_end >= self.pause_samples
        )

    def may_be_final(self, item: WorkerItem) -> bool:
        """A decode started now is likely the item's last: after a pause, with no final
        waiting, it runs at final priority so the commit can wait for it (issue 13)."""
        return self.reuse and self.after_pause(item) and self.gate.idle(final=True)

    def will_cover(self, item: WorkerItem) -> bool:
        """The chunk decode in flight is a likely final that covers every sound (issue 13).

        It runs at final priority, so it ends sooner than a final decode started now.
        """
        total = item.commit_total
        return (
            self.reuse
            and item.speculative
            and total is not None
            and min(item.speech_end, total) <= item.decoded_at <= total
        )

    def reusable(
        self, item: WorkerItem, total: int
    ) -> tuple[AsrHypothesis, DecodePlan] | None:
        """The last chunk hypothesis and its plan when it covered every sound up to
        ``total`` (issue 13) and has what the final needs (word times, when asked for)."""
        if not self.reuse or item.last_chunk is None:
            return None
        hyp, plan, covered = item.last_chunk
        if not hyp.full_context:
            return None  # the final's transcript is always a full-context decode's
        if covered > total or covered < min(item.speech_end, total):
            return None
        # Word times, when asked for, of a decode that asked for them (with "deltas" the
        # transcript has none); an engine that times no word gives none either way.
        if item.options.words and item.state.final_is_whole and not plan.words:
            return None
        if (item.state.logprobs and not hyp.tokens) or (
            item.options.segments and not hyp.segments
        ):
            return None
        return (hyp, plan) if item.state.completes(hyp, plan) else None
