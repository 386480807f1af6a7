"""Usage metering and quota of one realtime session (realtime §12, accounts §6, Q8).

One ``RealtimeUsage`` per connection holds the stream's ``Admission`` (None without one: the
built-in ``anonymous`` key is metered then, as with auth off on TTS) and the connection's one
``UsageMeter`` (MT-1, accounts U1). It calls ``accounts.metering`` in the order that module's
docstring gives: open before ``session.created``, reserve before accepting audio, count in
memory, tick, finish once, then release the admission.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

from accounts.admission import Admission
from accounts.metering import StreamUsage, TerminalStatus, UsageMeter, refuse
from asr.outputs import Completed
from gateway import metrics

UsageStatus = TerminalStatus  # the record's terminal statuses (accounts U9)


class RealtimeUsage(StreamUsage):
    """The usage record, quota reservations and admission of one realtime connection."""

    def __init__(
        self,
        admission: Admission | None,
        *,
        stream_id: uuid.UUID,
        started_at: datetime,
        request_id: str,
    ) -> None:
        self.admission = admission
        self.stream_id = stream_id
        self.started_at = started_at  # the accept time (accounts U3)
        self.request_id = request_id  # the session id, or the REST request's id
        self.meter: UsageMeter | None = None
        self.refused = False  # a refusal record was written

    @classmethod
    def start(
        cls, admission: Admission | None, *, accepted_at: float, request_id: str
    ) -> RealtimeUsage:
        """The usage of a connection accepted at ``accepted_at``; the stream id is the
        admission's (a fresh one for the ``anonymous`` key)."""
        stream_id = admission.stream_id if admission is not None else uuid.uuid4()
        started_at = datetime.fromtimestamp(accepted_at, tz=UTC)
        return cls(
            admission, stream_id=stream_id, started_at=started_at, request_id=request_id
        )

    async def open(self, *, model: str) -> None:
        """Commit the record with ``status=started`` (AU-4, accounts U2); idempotent.

        Raises ``AdmissionDenied("usage_unavailable")`` when the database refuses.
        """
        if self.meter is None:
            self.meter = UsageMeter.for_stream(
                self.admission,
                endpoint="asr",
                request_id=self.request_id,
                model=model,
                stream_id=self.stream_id,
                started_at=self.started_at,
            )
        await self.meter.open()

    async def accept(self, samples: int, rate: int) -> int:
        """MT-3, accounts Q8: how many of ``samples`` input samples fit in the quota reservations.

        Reserves ``ASR_QUOTA_CHUNK_MS`` at a time while the append does not fit; a result
        below ``samples`` means the quota ran out. Raises
        ``AdmissionDenied("limits_unavailable")`` when the limits store is down.
        """
        if self.meter is None or samples <= 0:
            return samples
        return await self.meter.accept_asr_audio(samples, rate, count=False)

    async def take(self, samples: int, rate: int) -> int:
        """``accept``, and the accepted samples metered at once (MT-2): one step per
        realtime append. An append that then overflows is given back (AI-1 step 6)."""
        if self.meter is None or samples <= 0:
            return samples
        return await self.meter.accept_asr_audio(samples, rate, count=True)

    def audio(self, samples: int, rate: int) -> None:
        """MT-2: accepted input samples, metered as exact milliseconds floored on the total."""
        if self.meter is not None and samples > 0:
            self.meter.add_audio(samples, rate)

    def give_back(self, samples: int, rate: int) -> None:
        """Un-meter samples that ``take`` metered: their append overflowed (AI-1 step 6)."""
        if self.meter is not None and samples > 0:
            self.meter.remove_audio(samples, rate)

    def completed(self, done: Completed) -> None:
        """A completed item sent (MT-4): metered, its latency since the commit observed."""
        latency = time.monotonic() - done.item.committed_at
        metrics.TTFB.labels("asr").observe(latency)
        self.item(len(done.transcript), latency)

    def item(self, chars: int, latency_s: float) -> None:
        """MT-4: one completed item, its transcript's characters and its latency."""
        if self.meter is not None:
            latency_ms = round(max(0.0, latency_s) * 1000)
            self.meter.add(asr_items=1, asr_chars_out=chars, asr_latency_ms=latency_ms)

    async def finish(
        self,
        *,
        status: UsageStatus,
        error_code: str = "",
        close_code: int | None = None,
    ) -> None:
        """Finalize the record once (U8, U9); later calls do nothing. Never raises.

        With no record opened (refused before ``session.created``, or a REST call refused
        before its audio was read), a failure leaves a refusal record (issue 30).
        """
        if self.meter is None:
            if status == "failed" and error_code and not self.refused:
                self.refused = True
                await refuse(
                    self.admission,
                    endpoint="asr",
                    request_id=self.request_id,
                    error_code=error_code,
                    close_code=close_code,
                )
            return
        await asyncio.shield(
            self.meter.finish(
                status=status,
                error_code=error_code,
                close_code=close_code,
            )
        )

    def describe(self) -> str:
        """Metered amounts for the close log line (lengths only, MT-5)."""
        if self.meter is None:
            return "no usage record"
        c = self.meter.counters
        return (
            f"{c.asr_audio_in_ms} ms in, {c.asr_items} items, {c.asr_chars_out} chars"
        )
