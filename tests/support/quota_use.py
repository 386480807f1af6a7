"""Meter TTS characters through admission as the TTS consumer does (accounts E1, Q7)."""

from __future__ import annotations

from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from accounts.metering import UsageMeter


async def spend_tts_chars(raw: str, chars: int) -> str:
    """Admit a TTS stream with key ``raw`` and meter ``chars`` through it: "ok", or the
    reason admission or the reservation refused."""
    scope = {
        "type": "websocket",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {raw}".encode())],
        "subprotocols": [],
    }
    try:
        admission = await admit(scope, endpoint="tts")
    except AdmissionDenied as exc:
        return exc.reason
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="q", model="m"
    )
    try:
        await meter.reserve_tts_chars(chars)
    except AdmissionDenied as exc:
        await meter.finish(status="failed", error_code=exc.reason)
        await admission.release()
        return exc.reason
    await meter.open()
    meter.add(tts_chars_in=chars)
    await meter.finish(status="completed")
    await admission.release()
    return "ok"
