"""The worker side of a realtime ASR session: per-item PCM buffers and decodes.

The gateway sends each new 16 kHz sample once (realtime WK-5); the worker keeps the item's PCM and
re-decodes it locally. With ``stream`` set, a chunk decode runs after every ``ASR_CHUNK_S`` of new
audio and confirmed words go out as ``gpu.asr.delta``; at commit the final decode's remainder goes
out as ``gpu.asr.final``. Decodes run one at a time per session, in item order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings

from asr.engines.base import MODEL_RATE, AsrDecodeRequest, AsrEngine
from asr.messages import (
    AsrAudio,
    AsrCommit,
    AsrDelta,
    AsrFinal,
    AsrItemOpen,
    AsrOpen,
    AsrResync,
)
from asr.streaming import confirm, remainder
from veena_site.contracts import JobFailed, Kind
from veena_site.jobs import Sender

logger = logging.getLogger(__name__)


@dataclass
class Item:
    """One item's audio and decoding state in the worker."""

    seq: int
    options: AsrItemOpen
    pcm: bytearray = field(default_factory=bytearray)
    emitted: str = ""
    previous: str = ""
    decoded_samples: int = 0
    committed: bool = False

    @property
    def samples(self) -> int:
        """Samples buffered so far."""
        return len(self.pcm) // 2

    def audio(self) -> np.ndarray:
        """The item's audio as float32 in [-1, 1)."""
        return np.frombuffer(bytes(self.pcm), dtype="<i2").astype(np.float32) / 32768.0


class AsrJob:
    """One realtime session in a worker slot; messages are queued and handled in order."""

    kind: Kind = "asr"

    def __init__(self, open_: AsrOpen, engine: AsrEngine, send: Sender) -> None:
        self.job_id = open_.job_id
        self.reply_channel = open_.reply_channel
        self.engine = engine
        self.send = send
        self.items: dict[int, Item] = {}
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.chunk_samples = int(settings.ASR_CHUNK_S * MODEL_RATE)
        self.max_samples = settings.ASR_MAX_BUFFER_S * MODEL_RATE

    def receive(self, message: dict[str, Any]) -> None:
        """Queue a pinned message; ``run`` handles it in arrival order."""
        self.inbox.put_nowait(message)

    async def run(self) -> None:
        """Handle messages until the session is cancelled."""
        while True:
            message = await self.inbox.get()
            kind = message["type"]
            if kind == AsrItemOpen.TYPE:
                opened = AsrItemOpen.from_message(message)
                item = Item(
                    seq=opened.item_seq, options=opened, emitted=opened.prefix_text
                )
                self.items[opened.item_seq] = item
            elif kind == AsrAudio.TYPE:
                await self._append(AsrAudio.from_message(message))
            elif kind == AsrCommit.TYPE:
                await self._commit(AsrCommit.from_message(message))
            else:
                self.items.pop(message["item_seq"], None)

    async def _append(self, audio: AsrAudio) -> None:
        item = self.items.get(audio.item_seq)
        if item is None:
            return
        if audio.offset != item.samples:
            await self.send(
                AsrResync(
                    job_id=self.job_id, item_seq=item.seq, have_samples=item.samples
                )
            )
            return
        item.pcm.extend(audio.pcm[: max(0, 2 * (self.max_samples - item.samples))])
        if item.options.stream and self.inbox.empty():
            if item.samples - item.decoded_samples >= self.chunk_samples:
                await self._chunk_decode(item)

    async def _chunk_decode(self, item: Item) -> None:
        item.decoded_samples = item.samples
        hyp = await self.engine.decode(self._request(item, final=False))
        update = confirm(
            emitted=item.emitted,
            hypothesis=hyp.text,
            previous=item.previous,
            unfixed_words=settings.ASR_UNFIXED_WORDS,
        )
        item.previous = hyp.text
        if update.confirmed:
            item.emitted += update.confirmed
            await self.send(
                AsrDelta(job_id=self.job_id, item_seq=item.seq, text=update.confirmed)
            )

    async def _commit(self, commit: AsrCommit) -> None:
        item = self.items.pop(commit.item_seq, None)
        if item is None:
            return
        started = time.monotonic()
        try:
            hyp = await self.engine.decode(self._request(item, final=True))
        except asyncio.CancelledError:
            raise
        except Exception:  # boundary: one item's final decode
            logger.exception(
                "asr job %s item %d: final decode failed", self.job_id, item.seq
            )
            await self.send(
                JobFailed(
                    job_id=self.job_id,
                    code="inference_failed",
                    stage="final",
                    item_seq=item.seq,
                )
            )
            return
        await self.send(
            AsrFinal(
                job_id=self.job_id,
                item_seq=item.seq,
                text=remainder(emitted=item.emitted, final=hyp.text),
                audio_ms=item.samples * 1000 // MODEL_RATE,
                decode_ms=int((time.monotonic() - started) * 1000),
            )
        )

    def _request(self, item: Item, *, final: bool) -> AsrDecodeRequest:
        return AsrDecodeRequest(
            audio=item.audio(),
            prompt=item.options.prompt,
            prefix=item.emitted if final or item.emitted else "",
            language=item.options.language,
        )
