"""S1, S4: a raw key appears in no table, log line or channel-layer message."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from accounts.metering import UsageMeter
from accounts.services.api_keys import api_key_revoke
from veena_site.asgi import application  # configures logging: import before caplog

from .conftest import bearer_scope, dump_database

pytestmark = pytest.mark.django_db(transaction=True)


def leaks(raw: str, text: str) -> bool:
    """The whole key, or its secret middle, in ``text``."""
    return raw in text or raw[14:-4] in text


def logged_text(records: list[logging.LogRecord]) -> str:
    lines = []
    for record in records:
        lines.append(record.getMessage())
        lines.append(repr(record.args))
        if record.exc_info:
            lines.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(lines)


async def drive(comm: WebsocketCommunicator, first: dict[str, Any] | None) -> None:
    """Connect, send ``first``, read until the server closes; without ``first``, read one
    event and hang up."""
    await comm.connect(timeout=5)
    if first is None:
        await comm.receive_output(timeout=5)
        await comm.disconnect()
        return
    await comm.send_to(text_data=json.dumps(first))
    while (await comm.receive_output(timeout=5))["type"] != "websocket.close":
        pass


async def test_s1_raw_key_is_nowhere(embedded_worker, keyed, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    api_key, raw = await keyed()
    layer = get_channel_layer()
    sent: list[str] = []
    original_send = layer.send

    async def recording_send(channel: str, message: dict[str, Any]) -> None:
        sent.append(repr(message))
        await original_send(channel, message)

    layer.send = recording_send

    # Every A2 source, through the real consumers.
    request = {"text": "Hello there.", "speaker": "male1"}
    for kwargs in (
        {"headers": [(b"authorization", f"Bearer {raw}".encode())]},
        {"headers": [(b"x-api-key", raw.encode())]},
        {"subprotocols": ["veena-tts", f"veena-api-key.{raw}"]},
    ):
        await drive(WebsocketCommunicator(application, "/v1/tts/ws", **kwargs), request)
    await drive(
        WebsocketCommunicator(application, f"/v1/tts/ws?api_key={raw}"), request
    )
    await drive(
        WebsocketCommunicator(
            application,
            "/v1/realtime?intent=transcription",
            subprotocols=["realtime", f"openai-insecure-api-key.{raw}"],
        ),
        None,
    )

    # Admission, metering and revocation directly.
    admission = await admit(bearer_scope(raw), endpoint="tts")
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r", model="m"
    )
    await meter.reserve_tts_chars(5)
    await meter.open()
    meter.add(tts_chars_in=5)
    await meter.finish(status="completed")
    await admission.release()
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="leak test"
    )
    with pytest.raises(AdmissionDenied) as info:
        await admit(bearer_scope(raw), endpoint="tts")
    assert not leaks(raw, str(info.value) + repr(info.value))

    assert sent, "the consumers sent nothing through the channel layer"
    assert not leaks(raw, "\n".join(sent))
    assert caplog.records and not leaks(raw, logged_text(caplog.records))
    dump = await database_sync_to_async(dump_database)()
    assert api_key.key_hash in dump and not leaks(raw, dump)
