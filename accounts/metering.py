"""Usage metering for one TTS request or one ASR stream (accounts §6, Q7–Q9).

``tts`` and ``asr`` meter through this module only (accounts L2). One ``UsageMeter`` is one
UsageRecord: per TTS *request* (a stream may carry several), per ASR *stream*. What a record
bills, and how it survives faults, is docs/accounting.md.

When to call what
=================

1. Create the meter when the request is received (TTS) or the stream is accepted (ASR)
   (``started_at``, U3): ``UsageMeter.for_admission(admission, endpoint=…, request_id=…,
   model=…)``, or ``UsageMeter.anonymous(…)`` with auth off (tts W7). Its ``route``
   (``tts_ws``, ``tts_rest``, ``speech_rest``, ``asr_realtime``, ``asr_rest``) follows
   from the admission's scope type; without an admission the REST views name it.

2. Reserve quota *before* the work it pays for (Q7, Q8): TTS
   ``await meter.reserve_tts_chars(n)`` per text unit, all-or-nothing, raising
   ``AdmissionDenied("quota_exceeded")`` before any audio; ASR
   ``accepted = await meter.accept_asr_audio(samples, rate, count=…)``, which reserves
   ``ASR_QUOTA_CHUNK_MS`` at a time while the audio does not fit (a grant of 0 stops the
   stream). Both raise ``AdmissionDenied("limits_unavailable")`` when the limits store is
   down. The reservations are ``MeterQuota``'s (``accounts.meter_quota``).

3. ``await meter.open()`` commits the record ``started`` (U2): TTS before the first binary
   frame, ASR before ``session.created``; ``AdmissionDenied("usage_unavailable")`` when the
   database refuses, ``AdmissionDenied("service_unavailable")`` when it does not answer
   (serve nothing then). Idempotent.

4. Count in memory (no I/O, cheap per frame): ``meter.add(…)``, ``meter.add_audio(samples,
   rate)`` (exact ms); a TTS request's delivered characters and samples are set by
   ``meter.settle_tts(…)`` before it finishes.

5. Tick at least once a second: ``reason = await stream_tick(admission, meter)``. It notes
   changed counters in the usage journal, checkpoints every ``USAGE_CHECKPOINT_SECONDS``
   (U5), re-checks the key, renews the lease and watches the maximum duration; a reason
   (``key_revoked``, ``lease_lost``, ``max_session_duration``, ``usage_unavailable``)
   means: send the E3 error, close, and finish ``failed`` with it.

6. Finish exactly once, on every exit path, then release the admission::

       await asyncio.shield(meter.finish(status="completed", close_code=1000, …))
       await admission.release()

   The end goes to the journal first and then to the database; a database error is
   retried until it lands. A meter never opened that ends ``failed`` with a code records a
   refusal (``refuse``). It returns unused reservations to the quota mirror (Q9).

``refuse(admission_or_key, …)`` (``accounts.refused``) records a request refused after its key
was known.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import datetime
from typing import NotRequired, TypedDict, Unpack

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from accounts.admission import Admission
from accounts.exceptions import AdmissionDenied, DenialReason
from accounts.journal import JournalEntry
from accounts.landing import land, note
from accounts.meter_quota import MeterQuota
from accounts.models.choices import Route
from accounts.refused import refuse, route_of
from accounts.services.api_keys import anonymous_api_key
from accounts.services.quota import period_of
from accounts.services.usage import (
    NewRecord,
    RecordEnd,
    TerminalStatus,
    UsageCounters,
    this_instance,
    usage_checkpoint,
    usage_open,
)
from accounts.usage_tally import MeteredEndpoint
from gateway.outages import is_outage, log_failure

__all__ = [
    "Route",
    "StreamUsage",
    "UsageCounters",
    "UsageMeter",
    "refuse",
    "stream_tick",
]

logger = logging.getLogger(__name__)


class MeterFields(TypedDict):
    """What names a meter's record, whoever opens it."""

    endpoint: MeteredEndpoint
    request_id: str
    model: str
    started_at: NotRequired[datetime | None]
    route: NotRequired[str | None]


class UsageMeter(MeterQuota):
    """The usage of one TTS request or one ASR stream, and its quota reservations.

    The counting itself is ``UsageTally``'s (``add``, ``add_audio``, ``counters``); the
    quota it may count against is ``MeterQuota``'s; this class writes the record.
    """

    def __init__(
        self,
        *,
        admission: Admission | None,
        stream_id: uuid.UUID,
        **fields: Unpack[MeterFields],
    ) -> None:
        endpoint = fields["endpoint"]
        started_at = fields.get("started_at") or timezone.now()
        super().__init__(
            endpoint=endpoint,
            record_id=uuid.uuid4(),
            admission=admission,
            period=period_of(started_at),
            stream_id=stream_id,
        )
        self.admission = admission
        self.route = fields.get("route") or route_of(endpoint, admission)
        self.request_id = fields["request_id"]
        self.model = fields["model"]
        self.stream_id = stream_id
        self.started_at = started_at
        self._persisted = UsageCounters()
        self._lock = asyncio.Lock()
        self._open_task: asyncio.Task[None] | None = None
        self._finish_task: asyncio.Task[bool] | None = None
        self._last_ok = time.monotonic()
        self._last_attempt = time.monotonic()
        self._new_record: NewRecord | None = None
        self._noted = UsageCounters()  # what the journal's live entry holds

    @classmethod
    def for_admission(
        cls, admission: Admission, **fields: Unpack[MeterFields]
    ) -> UsageMeter:
        """A meter for a request or stream of an admitted connection."""
        return cls(admission=admission, stream_id=admission.stream_id, **fields)

    @classmethod
    def anonymous(
        cls, *, stream_id: uuid.UUID | None = None, **fields: Unpack[MeterFields]
    ) -> UsageMeter:
        """A meter for the built-in ``anonymous`` key when auth is off (tts W7); no limits."""
        return cls(admission=None, stream_id=stream_id or uuid.uuid4(), **fields)

    @classmethod
    def for_stream(
        cls,
        admission: Admission | None,
        *,
        stream_id: uuid.UUID,
        **fields: Unpack[MeterFields],
    ) -> UsageMeter:
        """``for_admission`` when admitted, else ``anonymous`` on ``stream_id`` (W7)."""
        if admission is not None:
            return cls.for_admission(admission, **fields)
        return cls.anonymous(stream_id=stream_id, **fields)

    # The record.

    async def _record(self) -> NewRecord:
        if self._new_record is not None:
            return self._new_record
        if self.admission is not None:
            account_id = self.admission.principal.account_id
            key_id = self.admission.principal.key_id
        else:
            api_key = await database_sync_to_async(anonymous_api_key)()
            account_id, key_id = api_key.account_id, api_key.id
        self._new_record = NewRecord(
            id=self.record_id,
            stream_id=self.stream_id,
            request_id=self.request_id,
            account_id=account_id,
            api_key_id=key_id,
            endpoint=self.endpoint,
            model=self.model,
            started_at=self.started_at,
            instance=this_instance(),
            route=self.route,
        )
        return self._new_record

    async def _open(self) -> None:
        counters = self.counters
        try:
            await database_sync_to_async(usage_open)(
                record=await self._record(), counters=counters
            )
        except DatabaseError as error:
            log_failure(logger, "usage record %s not opened", self.record_id)
            # Unreachable: refused for now, retryable (docs/operations.md "Outages").
            reason: DenialReason = (
                "service_unavailable" if is_outage(error) else "usage_unavailable"
            )
            raise AdmissionDenied(reason) from None
        self._persisted = counters
        self._last_ok = self._last_attempt = time.monotonic()

    async def open(self) -> None:
        """Commit the record with ``status=started`` before any audio (U2); idempotent."""
        if self._open_task is None:
            self._open_task = asyncio.ensure_future(self._open())
        await asyncio.shield(self._open_task)

    @property
    def opened(self) -> bool:
        """True once the record is committed."""
        task = self._open_task
        return (
            task is not None
            and task.done()
            and not task.cancelled()
            and task.exception() is None
        )

    async def checkpoint(self) -> None:
        """Write the counters (U5). Raises ``AdmissionDenied("usage_unavailable")`` when the
        record is no longer started (U6) or no checkpoint succeeded for
        ``USAGE_STALE_SECONDS`` (U7); a passing database failure is only logged."""
        if not self.opened or self.finished:
            return
        async with self._lock:
            if self.finished:
                return
            self._last_attempt = time.monotonic()
            counters = self.counters
            try:
                started = await database_sync_to_async(usage_checkpoint)(
                    record_id=self.record_id, counters=counters
                )
            except DatabaseError:
                log_failure(
                    logger, "usage record %s: checkpoint failed", self.record_id
                )
                if time.monotonic() - self._last_ok >= settings.USAGE_STALE_SECONDS:
                    raise AdmissionDenied("usage_unavailable") from None
                return
            if not started:
                logger.warning("usage record %s is no longer started", self.record_id)
                raise AdmissionDenied("usage_unavailable")
            self._persisted = counters
            self._last_ok = time.monotonic()
            await self.quota.settle(counters, final=False)

    async def tick(self) -> DenialReason | None:
        """Note the counters in the journal when they changed (so a dead gateway's record
        settles from them), and checkpoint when ``USAGE_CHECKPOINT_SECONDS`` have passed;
        the stop reason, if any."""
        counters = self.counters
        if self.opened and not self.finished and counters != self._noted:
            live = JournalEntry(await self._record(), counters, timezone.now())
            if await note(live):
                self._noted = counters
        if time.monotonic() - self._last_attempt < settings.USAGE_CHECKPOINT_SECONDS:
            return None
        try:
            await self.checkpoint()
        except AdmissionDenied as stop:
            return stop.reason
        return None

    async def finish(
        self,
        *,
        status: TerminalStatus,
        error_code: str = "",
        close_code: int | None = None,
        ttfb_ms: int | None = None,
        rtf: float | None = None,
    ) -> bool:
        """Finalize the record exactly once (U8); True only for the call that did it.

        Safe under ``asyncio.shield`` and cancellation: the work runs in its own task.
        """
        owner = self._finish_task is None
        if self._finish_task is None:
            self.finished = True
            end = RecordEnd(status, error_code, close_code, ttfb_ms, rtf)
            self._finish_task = asyncio.ensure_future(self._finish(end))
        done = await asyncio.shield(self._finish_task)
        return done and owner

    async def _refused(self, end: RecordEnd) -> None:
        await refuse(
            self.admission,
            endpoint=self.endpoint,
            request_id=self.request_id,
            error_code=end.error_code,
            close_code=end.close_code,
            route=self.route,
            model=self.model,
        )

    async def _finish(self, end: RecordEnd) -> bool:
        """Journal the end, then land it (docs/accounting.md): a database that refuses
        gets it again until it lands, so the quota is settled as if it had."""
        if self._open_task is not None:
            await asyncio.wait([self._open_task])
        async with self._lock:
            counters = self.counters
            accounted, done = self._persisted, False
            try:
                if not self.opened and counters == UsageCounters() and end.error_code:
                    await self._refused(end)  # refused before any work (issue 30)
                elif self.opened or counters != UsageCounters():
                    entry = JournalEntry(
                        await self._record(), counters, timezone.now(), end
                    )
                    await note(entry)
                    landed = await land(entry)
                    done, accounted = bool(landed), counters
            except Exception:  # boundary: one record; the reaper ends it (U10)
                log_failure(logger, "usage record %s not finalized", self.record_id)
            await self.quota.settle(accounted, final=True)
        if done:
            logger.info(
                "usage record %s %s %s", self.record_id, self.endpoint, end.status
            )
        return done


async def stream_tick(
    admission: Admission | None, meter: UsageMeter | None
) -> DenialReason | None:
    """The per-stream tick (E6): checkpoint, key check, lease, duration; the stop reason."""
    if meter is not None:
        reason = await meter.tick()
        if reason is not None:
            return reason
    if admission is not None:
        return await admission.tick()
    return None


class StreamUsage:
    """The part every app's stream usage shares: its admission (None with auth off) and
    the meter of its open usage record (None between requests)."""

    admission: Admission | None
    meter: UsageMeter | None

    async def tick(self) -> DenialReason | None:
        """accounts E6: checkpoint when due (U5), key check, lease renewal, duration; the
        stop reason."""
        return await stream_tick(self.admission, self.meter)

    async def release(self) -> None:
        """Give back the lease (accounts E5, C3) after ``finish``; idempotent."""
        if self.admission is not None:
            await self.admission.release()
