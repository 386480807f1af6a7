"""Usage metering for one TTS request or one ASR stream (accounts §6, Q7–Q9).

``tts`` and ``asr`` meter through this module only (accounts L2). One ``UsageMeter`` is one
UsageRecord: per TTS *request* (a stream may carry several), per ASR *stream*.

When to call what
=================

1. Create the meter when the request is received (TTS) or the stream is accepted (ASR); that
   moment is ``started_at`` (U3)::

       meter = UsageMeter.for_admission(admission, endpoint="tts",
                                        request_id=request_id, model=model_version)
       # auth off (tts W7): UsageMeter.anonymous(endpoint="tts", request_id=...,
       #                                         model=..., stream_id=stream_id)

   The record's ``route`` (the dashboard's "tts ws / tts rest / realtime") follows from
   the endpoint and the admission's scope type; a meter without an admission (auth off)
   cannot tell REST from WebSocket, so ``POST /v1/tts`` should pass ``route="tts_rest"``.

2. Reserve quota *before* the work it pays for (Q7, Q8):

   * TTS: ``await meter.reserve_tts_chars(len(text))`` for each text unit (a request's
     ``text`` or one incremental ``text`` message) before it goes to the worker. It is
     all-or-nothing and raises ``AdmissionDenied("quota_exceeded")`` before any audio.
   * ASR: when an append does not fit in ``meter.asr_ms_available``, call
     ``granted = await meter.reserve_asr_ms()`` (``ASR_QUOTA_CHUNK_MS`` by default; the grant
     may be partial). Accept audio only up to what was granted; a grant of 0 stops the
     stream with ``quota_exceeded`` and the audio that did not fit is dropped, unmetered.

   Both raise ``AdmissionDenied("limits_unavailable")`` when the limits store is down.

3. ``await meter.open()`` commits the record with ``status=started`` (U2): TTS before the
   first binary frame (it may run as a task alongside job submission, awaited before the
   first frame), ASR before ``session.created``. It raises
   ``AdmissionDenied("usage_unavailable")`` when the database refuses: serve nothing then.
   Calling it again returns at once.

4. Count what actually happened, in memory (no I/O, cheap per frame)::

       meter.add(tts_chars_in=len(text))        # once the worker accepted the job (tts U2)
       meter.add_audio(samples, sample_rate)     # PCM handed to the socket (TTS) or
                                                 # accepted from the client (ASR), exact ms
       meter.add(asr_items=1, asr_chars_out=len(transcript), asr_latency_ms=latency)
       # each item's latency also lands in the record's histogram (accounts.histogram),
       # which the rollups merge into per-day p50/p95

   ``meter.counters`` is the current ``UsageCounters`` snapshot.

5. The per-stream tick task, at least once a second::

       reason = await stream_tick(admission, meter)   # meter may be None between requests
       if reason: stop the stream (E7)

   It checkpoints every ``USAGE_CHECKPOINT_SECONDS`` (U5), re-checks the key (one store
   GET), renews the lease every ``LEASE_RENEW_SECONDS`` and watches the maximum duration.
   A reason (``key_revoked``, ``lease_lost``, ``max_session_duration``,
   ``usage_unavailable``) means: send the E3 error, close, and finish with
   ``status="failed", error_code=reason``. ``await meter.checkpoint()`` may also be called
   directly; it raises ``AdmissionDenied("usage_unavailable")`` under U6/U7 only.

6. Finish exactly once, on every exit path, then release the admission::

       await asyncio.shield(meter.finish(status="completed", close_code=1000,
                                         ttfb_ms=ttfb_ms, rtf=rtf))
       await admission.release()

   ``status`` is ``completed``, ``cancelled`` or ``failed`` (U9). The first call returns
   True when it finalized the record; later calls wait for it and return False. It never
   raises: a database failure is logged and the reaper later marks the record
   ``abandoned`` with its last checkpointed counters. It also returns unused reservations
   to the quota mirror (Q9), so a reservation whose job never started costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import datetime
from fractions import Fraction
from typing import Literal

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from accounts import histogram
from accounts.admission import Admission, quota_limit, reserve_quota
from accounts.exceptions import AdmissionDenied, DenialReason
from accounts.limits import get_limiter, in_store
from accounts.limits.base import holder_of
from accounts.models.choices import QuotaMetric, Route
from accounts.services.api_keys import anonymous_api_key
from accounts.services.quota import period_of
from accounts.services.usage import (
    NewRecord,
    TerminalStatus,
    UsageCounters,
    this_instance,
    usage_checkpoint,
    usage_counters,
    usage_finish,
    usage_open,
    usage_record_finished,
)

__all__ = ["Route", "UsageCounters", "UsageMeter", "stream_tick"]

logger = logging.getLogger(__name__)

MeteredEndpoint = Literal["tts", "asr"]


def route_of(endpoint: str, admission: Admission | None) -> str:
    """The route of a meter: realtime for ASR; for TTS, REST when admitted over HTTP.

    A meter with no admission (auth off, tts W7) cannot tell, and says ``tts_ws`` unless
    its opener names the route.
    """
    if endpoint == "asr":
        return Route.REALTIME
    if admission is not None and admission.transport == "http":
        return Route.TTS_REST
    return Route.TTS_WS


class UsageMeter:
    """The usage of one TTS request or one ASR stream, and its quota reservations."""

    def __init__(
        self,
        *,
        admission: Admission | None,
        endpoint: MeteredEndpoint,
        request_id: str,
        model: str,
        stream_id: uuid.UUID,
        started_at: datetime | None = None,
        route: str | None = None,
    ) -> None:
        assert endpoint in ("tts", "asr"), endpoint
        self.admission = admission
        self.endpoint: MeteredEndpoint = endpoint
        self.route = route or route_of(endpoint, admission)
        self.request_id = request_id
        self.model = model
        self.stream_id = stream_id
        self.record_id = uuid.uuid4()
        self.started_at = started_at or timezone.now()
        self.period = period_of(self.started_at)
        self._counts: dict[str, int] = {
            name: 0
            for name in UsageCounters.__dataclass_fields__
            if name != "asr_latency_hist"
        }
        self._asr_hist = histogram.empty()
        self._audio = Fraction(0)
        self._reserved: dict[str, int] = {
            QuotaMetric.TTS_CHARACTERS: 0,
            QuotaMetric.ASR_AUDIO_MS: 0,
        }
        self._persisted = UsageCounters()
        # Per metric, what the store's reservations entry of this record says it holds.
        self._outstanding: dict[str, int] = dict.fromkeys(self._reserved, 0)
        self._lock = asyncio.Lock()
        self._open_task: asyncio.Task[None] | None = None
        self._finish_task: asyncio.Task[bool] | None = None
        self._last_ok = time.monotonic()
        self._last_attempt = time.monotonic()

    @classmethod
    def for_admission(
        cls,
        admission: Admission,
        *,
        endpoint: MeteredEndpoint,
        request_id: str,
        model: str,
        started_at: datetime | None = None,
        route: str | None = None,
    ) -> UsageMeter:
        """A meter for a request or stream of an admitted connection."""
        return cls(
            admission=admission,
            endpoint=endpoint,
            request_id=request_id,
            model=model,
            stream_id=admission.stream_id,
            started_at=started_at,
            route=route,
        )

    @classmethod
    def anonymous(
        cls,
        *,
        endpoint: MeteredEndpoint,
        request_id: str,
        model: str,
        stream_id: uuid.UUID | None = None,
        started_at: datetime | None = None,
        route: str | None = None,
    ) -> UsageMeter:
        """A meter for the built-in ``anonymous`` key when auth is off (tts W7); no limits."""
        return cls(
            admission=None,
            endpoint=endpoint,
            request_id=request_id,
            model=model,
            stream_id=stream_id or uuid.uuid4(),
            started_at=started_at,
            route=route,
        )

    @classmethod
    def for_stream(
        cls,
        admission: Admission | None,
        *,
        endpoint: MeteredEndpoint,
        request_id: str,
        model: str,
        stream_id: uuid.UUID,
        started_at: datetime | None = None,
        route: str | None = None,
    ) -> UsageMeter:
        """``for_admission`` when admitted, else ``anonymous`` on ``stream_id`` (W7)."""
        if admission is not None:
            return cls.for_admission(
                admission,
                endpoint=endpoint,
                request_id=request_id,
                model=model,
                started_at=started_at,
                route=route,
            )
        return cls.anonymous(
            endpoint=endpoint,
            request_id=request_id,
            model=model,
            stream_id=stream_id,
            started_at=started_at,
            route=route,
        )

    # Counters.

    @property
    def counters(self) -> UsageCounters:
        """The counters so far (U4)."""
        audio_field = (
            "tts_audio_out_ms" if self.endpoint == "tts" else "asr_audio_in_ms"
        )
        counts = dict(self._counts)
        counts[audio_field] += int(self._audio)
        hist = tuple(self._asr_hist) if any(self._asr_hist) else ()
        return UsageCounters(**counts, asr_latency_hist=hist)

    @property
    def finished(self) -> bool:
        """True once ``finish()`` has been called."""
        return self._finish_task is not None

    def add(
        self,
        *,
        tts_chars_in: int = 0,
        tts_audio_out_ms: int = 0,
        asr_audio_in_ms: int = 0,
        asr_chars_out: int = 0,
        asr_items: int = 0,
        asr_latency_ms: int | None = None,
    ) -> None:
        """Add to the counters in memory; ``asr_latency_ms`` is one item's latency."""
        if self.finished:
            logger.debug("usage record %s: add() after finish ignored", self.record_id)
            return
        for name, value in (
            ("tts_chars_in", tts_chars_in),
            ("tts_audio_out_ms", tts_audio_out_ms),
            ("asr_audio_in_ms", asr_audio_in_ms),
            ("asr_chars_out", asr_chars_out),
            ("asr_items", asr_items),
        ):
            assert value >= 0, (name, value)
            self._counts[name] += value
        if asr_latency_ms is not None:
            latency = max(0, int(asr_latency_ms))
            self._counts["asr_latency_ms_sum"] += latency
            self._counts["asr_latency_ms_max"] = max(
                self._counts["asr_latency_ms_max"], latency
            )
            histogram.observe(self._asr_hist, latency)

    def add_audio(self, samples: int, sample_rate: int) -> None:
        """Count PCM samples as audio milliseconds, floored on the running total (Q1)."""
        assert samples >= 0 and sample_rate > 0, (samples, sample_rate)
        if not self.finished:
            self._audio += Fraction(samples * 1000, sample_rate)

    # Quota.

    @property
    def reserved_tts_chars(self) -> int:
        """TTS characters reserved so far."""
        return self._reserved[QuotaMetric.TTS_CHARACTERS]

    @property
    def reserved_asr_ms(self) -> int:
        """ASR audio milliseconds granted so far."""
        return self._reserved[QuotaMetric.ASR_AUDIO_MS]

    @property
    def asr_ms_available(self) -> int:
        """Granted ASR milliseconds not yet metered: audio that may still be accepted."""
        return self.reserved_asr_ms - self.counters.asr_audio_in_ms

    async def _reserve(self, metric: str, amount: int, *, partial: bool) -> int:
        if self.admission is None:
            grant = amount
        else:
            principal = self.admission.principal
            reserved = await reserve_quota(
                account_id=principal.account_id,
                metric=metric,
                period=self.period,
                amount=amount,
                limit=quota_limit(principal, metric),
                partial=partial,
                holder=self.holder,
            )
            grant = reserved.granted
            self._outstanding[metric] += grant
        self._reserved[metric] += grant
        return grant

    @property
    def holder(self) -> str:
        """This record's name in the account's reservations (Q11)."""
        stream_id = self.admission.stream_id if self.admission else self.stream_id
        return holder_of(stream_id, self.record_id)

    async def reserve_tts_chars(self, n: int) -> None:
        """Reserve ``n`` characters all-or-nothing (Q7), or raise ``quota_exceeded``."""
        assert n >= 0 and not self.finished
        if n and await self._reserve(QuotaMetric.TTS_CHARACTERS, n, partial=False) < n:
            raise AdmissionDenied("quota_exceeded")

    async def reserve_asr_ms(self, ms: int | None = None) -> int:
        """Reserve up to ``ms`` (default ``ASR_QUOTA_CHUNK_MS``); return the grant (Q8)."""
        assert not self.finished
        amount = settings.ASR_QUOTA_CHUNK_MS if ms is None else ms
        assert amount > 0, amount
        return await self._reserve(QuotaMetric.ASR_AUDIO_MS, amount, partial=True)

    # The record.

    async def _record(self) -> NewRecord:
        if self.admission is not None:
            account_id = self.admission.principal.account_id
            key_id = self.admission.principal.key_id
        else:
            api_key = await database_sync_to_async(anonymous_api_key)()
            account_id, key_id = api_key.account_id, api_key.id
        return NewRecord(
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

    async def _open(self) -> None:
        counters = self.counters
        try:
            await database_sync_to_async(usage_open)(
                record=await self._record(), counters=counters
            )
        except DatabaseError:
            logger.exception("usage record %s not opened", self.record_id)
            raise AdmissionDenied("usage_unavailable") from None
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
                logger.exception("usage record %s: checkpoint failed", self.record_id)
                if time.monotonic() - self._last_ok >= settings.USAGE_STALE_SECONDS:
                    raise AdmissionDenied("usage_unavailable") from None
                return
            if not started:
                logger.warning("usage record %s is no longer started", self.record_id)
                raise AdmissionDenied("usage_unavailable")
            self._persisted = counters
            self._last_ok = time.monotonic()
            await self._settle_quota(counters, final=False)

    async def tick(self) -> DenialReason | None:
        """Checkpoint when ``USAGE_CHECKPOINT_SECONDS`` have passed; the stop reason, if any."""
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
            self._finish_task = asyncio.ensure_future(
                self._finish(
                    status=status,
                    error_code=error_code,
                    close_code=close_code,
                    ttfb_ms=ttfb_ms,
                    rtf=rtf,
                )
            )
        done = await asyncio.shield(self._finish_task)
        return done and owner

    async def _finish(
        self,
        *,
        status: TerminalStatus,
        error_code: str,
        close_code: int | None,
        ttfb_ms: int | None,
        rtf: float | None,
    ) -> bool:
        if self._open_task is not None:
            await asyncio.wait([self._open_task])
        async with self._lock:
            counters = self.counters
            accounted, done = self._persisted, False
            try:
                if self.opened:
                    done = await database_sync_to_async(usage_finish)(
                        record_id=self.record_id,
                        counters=counters,
                        status=status,
                        error_code=error_code,
                        close_code=close_code,
                        ttfb_ms=ttfb_ms,
                        rtf=rtf,
                    )
                    if not done:  # reaped meanwhile: it keeps its last checkpoint
                        stored = await database_sync_to_async(usage_counters)(
                            record_id=self.record_id
                        )
                        accounted = stored or self._persisted
                elif counters != UsageCounters():
                    done = await database_sync_to_async(usage_record_finished)(
                        record=await self._record(),
                        counters=counters,
                        status=status,
                        error_code=error_code,
                        close_code=close_code,
                        ttfb_ms=ttfb_ms,
                        rtf=rtf,
                    )
                if done:
                    accounted = counters
            except Exception:  # boundary: one record; the reaper ends it (U10)
                logger.exception("usage record %s not finalized", self.record_id)
            await self._settle_quota(accounted, final=True)
        if done:
            logger.info("usage record %s %s %s", self.record_id, self.endpoint, status)
        return done

    async def _settle_quota(self, accounted: UsageCounters, *, final: bool) -> None:
        """Q9, Q11: after a database write of ``accounted``, tell the store what the
        reservations still hold; at the end, move the mirror from reserved to metered.

        A settlement that fails leaves the store holding too much, never too little;
        reconciliation corrects it once this stream's lease is gone.
        """
        if self.admission is None:
            return
        limiter = get_limiter()
        used = accounted.quota()
        for metric, reserved in self._reserved.items():
            outstanding = 0 if final else max(0, reserved - used[metric])
            delta = used[metric] - reserved if final else 0
            if outstanding == self._outstanding[metric] and not delta:
                continue
            try:
                await in_store(
                    limiter.settle_quota,
                    account_id=self.admission.principal.account_id,
                    metric=metric,
                    period=self.period,
                    holder=self.holder,
                    outstanding=outstanding,
                    delta=delta,
                )
            except AdmissionDenied:
                logger.warning(
                    "usage record %s: quota mirror not settled", self.record_id
                )
                continue
            self._outstanding[metric] = outstanding


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
