"""What one usage record has counted so far, in memory (accounts U4): no I/O, cheap per frame."""

from __future__ import annotations

import logging
import uuid
from fractions import Fraction
from typing import Literal

from accounts import histogram
from accounts.services.usage import COUNTER_FIELDS, UsageCounters

logger = logging.getLogger(__name__)

MeteredEndpoint = Literal["tts", "asr"]


class UsageTally:
    """The counters of one TTS request or ASR stream; they stop once ``finished``."""

    def __init__(self, *, endpoint: MeteredEndpoint, record_id: uuid.UUID) -> None:
        assert endpoint in ("tts", "asr"), endpoint
        self.endpoint: MeteredEndpoint = endpoint
        self.record_id = record_id
        # Set by the owner when the record is finalized: later counts are ignored.
        self.finished = False
        self._counts = dict.fromkeys(
            (name for name in COUNTER_FIELDS if name != "asr_latency_hist"), 0
        )
        self._asr_hist = histogram.empty()
        self._audio = Fraction(0)

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

    def remove_audio(self, samples: int, sample_rate: int) -> None:
        """Take back samples counted by ``add_audio`` that turned out not to be accepted
        (a realtime append that overflowed); the total is exact, so nothing is lost."""
        assert samples >= 0 and sample_rate > 0, (samples, sample_rate)
        if not self.finished:
            self._audio -= Fraction(samples * 1000, sample_rate)

    def settle_tts(self, *, chars: int, samples: int, sample_rate: int) -> None:
        """Set the TTS counters to what the request bills (docs/accounting.md): its
        delivered characters, and its delivered samples as exact milliseconds."""
        assert self.endpoint == "tts" and chars >= 0 and samples >= 0, (chars, samples)
        if self.finished:
            return
        self._counts["tts_chars_in"] = chars
        self._counts["tts_audio_out_ms"] = 0
        self._audio = Fraction(samples * 1000, sample_rate)
