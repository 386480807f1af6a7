"""Usage metering, quota and per-request limits of the TTS endpoints (tts §12, K4, I2).

One ``TtsUsage`` per stream (or per REST call) holds the stream's ``Admission`` (None with auth
off, W7) and the ``UsageMeter`` of its current request, and calls ``accounts.metering`` in the
order its module docstring gives: reserve before submit, open alongside the submission and
committed before the first binary frame, count in memory, tick, finish once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from accounts.admission import Admission
from accounts.exceptions import AdmissionDenied, DeniedKey
from accounts.metering import StreamUsage, TerminalStatus, UsageMeter, refuse
from gateway.link.timers import TICK_S
from tts.delivery import Billed, Delivery

logger = logging.getLogger(__name__)

UsageStatus = TerminalStatus  # the record's terminal statuses (accounts U8)
T = TypeVar("T")


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a task's failure as seen: its owner acts on it another way."""
    if not task.cancelled():
        task.exception()


class TtsUsage(StreamUsage):
    """Usage of one stream's requests, one at a time; every release is idempotent."""

    def __init__(
        self,
        admission: Admission | None = None,
        *,
        stream_id: uuid.UUID | None = None,
        route: str | None = None,
    ) -> None:
        self.admission = admission
        self.anonymous_stream_id = stream_id or uuid.uuid4()  # auth off (W7)
        self.route = route  # None: from the admission (accounts.metering.route_of)
        # The key of a denial at admission, when it was known: its refusal is its usage.
        self.known_key: DeniedKey | None = None
        self.meter: UsageMeter | None = None
        self.delivery: Delivery | None = None  # what of the request reached the client
        self.accepted_chars = 0  # characters reserved for the request (Q7)
        self._opening: asyncio.Future[None] | None = None

    async def take_request_token(self) -> None:
        """K4 / accounts E8: one more RPM token for each request after the first."""
        if self.admission is not None:
            await self.admission.take_request_token()

    async def open_request(
        self, *, request_id: str, model: str, text_chars: int, sample_rate: int
    ) -> None:
        """L1 step 7: reserve the text all-or-nothing (accounts Q7), then start the record's INSERT.

        Raises ``AdmissionDenied`` (``quota_exceeded``, ``limits_unavailable``) before any
        audio; the INSERT runs alongside the job submission and ``ready()`` awaits it.
        """
        if self.meter is not None:  # a request that was never finished: close it now
            await self.finish(status="failed", error_code="internal_error")
        meter = UsageMeter.for_stream(
            self.admission,
            endpoint="tts",
            request_id=request_id,
            model=model,
            stream_id=self.anonymous_stream_id,
            route=self.route,
        )
        self.meter, self.delivery = meter, Delivery(sample_rate=sample_rate)
        self.accepted_chars = 0
        await self.reserve_text(chars=text_chars)
        self._opening = asyncio.ensure_future(meter.open())
        self._opening.add_done_callback(_retrieve)

    async def ready(self) -> None:
        """U1 / accounts U2: wait until the record is committed; call before the first binary frame.

        Raises ``AdmissionDenied("usage_unavailable")`` when the database refused it.
        """
        if self.meter is not None:
            await self.meter.open()

    async def reserve_text(self, *, chars: int) -> None:
        """I2 / accounts Q7: one text unit, all or nothing; billed as its audio is delivered."""
        if self.meter is None or chars <= 0:
            return
        await self.meter.reserve_tts_chars(chars)
        self.accepted_chars += chars

    def frame_sent(self, nbytes: int, samples: int, *, segment_chars: int = 0) -> None:
        """A frame handed to the socket (a WAV header frame carries no samples), and the
        characters of the segment it ends, if it ends one (docs/accounting.md)."""
        if self.meter is None or self.delivery is None:
            return
        self.delivery.frame(nbytes, samples, segment_chars=segment_chars)
        if samples > 0:
            self.meter.add_audio(samples, self.delivery.sample_rate)
        if segment_chars:
            self.meter.add(tts_chars_in=segment_chars)

    def cleared(self, chars: int) -> None:
        """C2: the client cleared ``chars`` accepted characters before their audio."""
        if self.delivery is not None and chars > 0:
            self.delivery.cleared(chars)

    async def finish(
        self,
        *,
        status: UsageStatus,
        error_code: str = "",
        close_code: int | None = None,
        ttfb_ms: int | None = None,
        rtf: float | None = None,
        unsent: int = 0,
    ) -> bool:
        """U3 / accounts U8: bill what was delivered and finalize the record once,
        shielded; ``unsent`` bytes never reached the client (the stream ended with them
        still in the gateway's write buffer).

        Later calls, and calls with no request, do nothing and return False.
        """
        meter, self.meter, self._opening = self.meter, None, None
        if meter is None:
            return False
        if self.delivery is not None:
            billed = self.billed(status=status, unsent=unsent)
            meter.settle_tts(
                chars=billed.chars,
                samples=billed.samples,
                sample_rate=billed.sample_rate,
            )
        return await asyncio.shield(
            meter.finish(
                status=status,
                error_code=error_code[:40],
                close_code=close_code,
                ttfb_ms=ttfb_ms,
                rtf=rtf,
            )
        )

    def billed(self, *, status: UsageStatus, unsent: int = 0) -> Billed:
        """What the current request bills if it ends now with ``status``."""
        assert self.delivery is not None
        return self.delivery.billed(
            completed=status == "completed",
            accepted_chars=self.accepted_chars,
            unsent=unsent,
        )

    async def fail(
        self, *, request_id: str, error_code: str, close_code: int | None = None
    ) -> None:
        """End the current request as failed; a request refused before it was metered
        leaves a refusal record instead (issue 30: zero units, its code)."""
        if self.meter is not None:
            await self.finish(
                status="failed", error_code=error_code, close_code=close_code
            )
            return
        await refuse(
            self.admission or self.known_key,
            endpoint="tts",
            request_id=request_id,
            error_code=error_code[:40],
            close_code=close_code,
            route=self.route,
        )

    async def end(
        self,
        *,
        status: UsageStatus,
        request_id: str,
        error_code: str = "",
        close_code: int | None = None,
    ) -> None:
        """A REST request's last step: finish the record (``close_code``: the HTTP status
        sent), then give the lease back, both whatever happens (a record the database
        refused lands later from the journal)."""
        try:
            if status == "failed":
                await self.fail(
                    request_id=request_id, error_code=error_code, close_code=close_code
                )
            else:
                await self.finish(status=status, close_code=close_code)
        except Exception:  # boundary: the record (the journal lands it later)
            logger.exception("usage record not finalized")
        await asyncio.shield(self.release())


async def while_ticking(usage: TtsUsage, work: Awaitable[T]) -> T:
    """Await ``work`` while ticking ``usage`` every ``TICK_S`` (REST, accounts E6).

    A stop reason cancels the work and raises ``AdmissionDenied(reason)``; so does the
    caller's own cancellation (H5), which the work sees first.
    """
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=TICK_S)
            if done:
                return task.result()
            reason = await usage.tick()
            if reason is not None:
                logger.info("tts rest request stopped: %s", reason)
                raise AdmissionDenied(reason)
    finally:
        if not task.done():
            task.add_done_callback(_retrieve)
            task.cancel()
            await asyncio.wait([task])
