"""The quota one usage record holds in the limits store's mirror (accounts Q7–Q9, Q11)."""

from __future__ import annotations

import logging
import uuid

from accounts.admission import Admission
from accounts.exceptions import AdmissionDenied
from accounts.limits import get_limiter, in_store
from accounts.limits.base import holder_of
from accounts.models.choices import QuotaMetric
from accounts.quota_mirror import quota_limit, reserve_quota
from accounts.services.usage import UsageCounters

logger = logging.getLogger(__name__)


class QuotaReservations:
    """What one record reserved per metric, and what the store's entry says it holds.

    Without an admission (auth off, tts W7) every reservation is granted in full and the
    store is never asked.
    """

    def __init__(
        self,
        *,
        admission: Admission | None,
        period: str,
        stream_id: uuid.UUID,
        record_id: uuid.UUID,
    ) -> None:
        self.admission = admission
        self.period = period
        self.record_id = record_id
        # This record's name in the account's reservations (Q11).
        self.holder = holder_of(stream_id, record_id)
        self.reserved: dict[str, int] = {
            QuotaMetric.TTS_CHARACTERS: 0,
            QuotaMetric.ASR_AUDIO_MS: 0,
        }
        # Per metric, what the store's reservations entry of this record says it holds.
        self._outstanding: dict[str, int] = dict.fromkeys(self.reserved, 0)

    async def reserve(self, metric: str, amount: int, *, partial: bool) -> int:
        """Reserve ``amount`` (all or nothing unless ``partial``); return the grant."""
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
        self.reserved[metric] += grant
        return grant

    async def settle(self, accounted: UsageCounters, *, final: bool) -> None:
        """Q9, Q11: after a database write of ``accounted``, tell the store what the
        reservations still hold; at the end, move the mirror from reserved to metered.

        A settlement that fails leaves the store holding too much, never too little;
        reconciliation corrects it once this stream's lease is gone.
        """
        if self.admission is None:
            return
        limiter = get_limiter()
        used = accounted.quota()
        for metric, reserved in self.reserved.items():
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
