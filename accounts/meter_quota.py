"""The quota one usage record may count against (accounts Q7–Q9, Q11), over its tally.

``MeterQuota`` is ``UsageTally``'s counting plus the record's reservations in the limits
store's mirror (``QuotaReservations``): TTS characters are reserved all-or-nothing before the
work they pay for (Q7); ASR audio is reserved ``ASR_QUOTA_CHUNK_MS`` at a time as the audio
needs it, and audio is accepted only as far as the grants reach (Q8). ``UsageMeter``
(``accounts.metering``) adds the record itself.
"""

from __future__ import annotations

import uuid
from fractions import Fraction

from django.conf import settings

from accounts.admission import Admission
from accounts.exceptions import AdmissionDenied
from accounts.models.choices import QuotaMetric
from accounts.reservations import QuotaReservations
from accounts.usage_tally import MeteredEndpoint, UsageTally


class MeterQuota(UsageTally):
    """The counters of one record and the quota it holds to count against."""

    def __init__(
        self,
        *,
        endpoint: MeteredEndpoint,
        record_id: uuid.UUID,
        admission: Admission | None,
        period: str,
        stream_id: uuid.UUID,
    ) -> None:
        super().__init__(endpoint=endpoint, record_id=record_id)
        self.period = period
        self.quota = QuotaReservations(
            admission=admission, period=period, stream_id=stream_id, record_id=record_id
        )

    @property
    def holder(self) -> str:
        """This record's name in the account's reservations (Q11)."""
        return self.quota.holder

    @property
    def reserved_tts_chars(self) -> int:
        """TTS characters reserved so far."""
        return self.quota.reserved[QuotaMetric.TTS_CHARACTERS]

    @property
    def reserved_asr_ms(self) -> int:
        """ASR audio milliseconds granted so far."""
        return self.quota.reserved[QuotaMetric.ASR_AUDIO_MS]

    @property
    def asr_ms_available(self) -> int:
        """Granted ASR milliseconds not yet metered: audio that may still be accepted."""
        return self.reserved_asr_ms - self.counters.asr_audio_in_ms

    async def reserve_tts_chars(self, n: int) -> None:
        """Reserve ``n`` characters all-or-nothing (Q7), or raise ``quota_exceeded``."""
        assert n >= 0 and not self.finished
        metric = QuotaMetric.TTS_CHARACTERS
        if n and await self.quota.reserve(metric, n, partial=False) < n:
            raise AdmissionDenied("quota_exceeded")

    async def reserve_asr_ms(self, ms: int | None = None) -> int:
        """Reserve up to ``ms`` (default ``ASR_QUOTA_CHUNK_MS``); return the grant (Q8)."""
        assert not self.finished
        amount = settings.ASR_QUOTA_CHUNK_MS if ms is None else ms
        assert amount > 0, amount
        return await self.quota.reserve(QuotaMetric.ASR_AUDIO_MS, amount, partial=True)

    async def accept_asr_audio(self, samples: int, rate: int, *, count: bool) -> int:
        """How many of ``samples`` input samples at ``rate`` fit in the reservations (Q8);
        with ``count`` they are counted at once (``add_audio``).

        Reserves ``ASR_QUOTA_CHUNK_MS`` at a time while they do not fit; a grant of 0 stops
        reserving, and a result below ``samples`` means the quota ran out. Raises
        ``AdmissionDenied("limits_unavailable")`` when the limits store is down.
        """
        accepted = samples
        needed = Fraction(samples * 1000, rate)
        available = self.asr_ms_available
        while needed > available:
            if not await self.reserve_asr_ms():
                break
            available = self.asr_ms_available
        if needed > available:
            # Floor of the metered total stays within the grant (accounts Q1, Q8).
            accepted = min(samples, max(0, available) * rate // 1000)
        if count and accepted > 0:
            self.add_audio(accepted, rate)
        return accepted
