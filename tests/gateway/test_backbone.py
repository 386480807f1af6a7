"""Gateway-side backbone: chunk gaps, readiness, metrics, logging."""

from __future__ import annotations

import json
import logging

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from gateway.logs import redact
from tests.gateway.test_roundtrip import bearer, collect_tts
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_gap_in_chunk_sequence_is_internal_error(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    embedded_worker.engines["tts"].engine.chunk_delay_s = 0.05
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data=json.dumps({"text": "g" * 1000}))
    assert json.loads(await comm.receive_from())["event"] == "header"
    job_id = next(iter(embedded_worker.jobs.running))
    reply = embedded_worker.jobs.running[job_id].reply_channel
    await get_channel_layer().send(
        reply,
        {
            "type": "gpu.tts.chunk",
            "job_id": job_id,
            "seq": 999,
            "segment_seq": 0,
            "data": b"\x00\x00",
            "samples": 1,
        },
    )
    events, _, close = await collect_tts(comm)
    assert events[-1]["error"]["code"] == "INTERNAL_ERROR"
    assert close["code"] == 1011


async def test_readyz_false_without_worker_and_true_with_one(
    transactional_db: None,
) -> None:
    client = AsyncClient()
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["workers"] == {"tts": 0, "asr": 0}


async def test_readyz_true_with_embedded_worker(embedded_worker: WorkerRuntime) -> None:
    from gateway.liveness import get_liveness

    await get_liveness().publish(embedded_worker.status())
    response = await AsyncClient().get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["database"] and body["channel_layer"] and body["topology"] == "embedded"


async def test_metrics_expose_the_backbone_series(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data=json.dumps({"text": "Count me."}))
    await collect_tts(comm)
    from gateway.liveness import get_liveness

    await get_liveness().publish(embedded_worker.status())
    body = (await AsyncClient().get("/metrics")).content.decode()
    for name in (
        "veena_requests_total",
        "veena_ttfb_seconds",
        "veena_active_streams",
        "veena_worker_slots_in_use",
        "veena_channel_hop_seconds",
        "veena_rtf",
    ):
        assert name in body


def test_credentials_are_redacted_from_log_lines() -> None:
    raw = "vk_live_" + "A" * 32 + "abcdef"
    line = f"GET /v1/tts/ws?api_key={raw}&x=1 Authorization: Bearer {raw} veena-api-key.{raw}"
    clean = redact(line)
    assert raw not in clean and "api_key=[REDACTED]" in clean


def test_every_log_line_has_a_request_id(caplog: pytest.LogCaptureFixture) -> None:
    from gateway.logs import (
        JsonFormatter,
        RedactFilter,
        RequestIdFilter,
        new_request_id,
    )

    rid = new_request_id()
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "hello %s", ("api_key=zzz",), None
    )
    RequestIdFilter().filter(record)
    RedactFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == rid and line["message"] == "hello api_key=[REDACTED]"
