"""The audio endpoints through the real ASGI application, the embedded worker and the fake
engines: every exit path finishes the record and frees the lease (fast; no real engine)."""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
from typing import Any

import numpy as np
import pytest
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from asr.worker.engines.base import AsrDecodeRequest, AsrHypothesis
from asr.worker.engines.fake import FakeAsr, fake_transcript
from openai_rest.decode import decode_upload
from openai_rest.split import split_pieces
from tests.conftest import KeyMaker
from tests.openai_rest.conftest import encode_container
from tests.support.sse import data_events
from tests.tts.conftest import (
    lease_free,
    open_records,
    revoke_once_busy,
    slow_fake,
    usage_records,
)
from tests.tts.test_rest import Response, auth, http, request
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["slow_fake"]

TEXT = "Hello world. How are you today?"


async def speech(body: dict[str, Any], key: str) -> Response:
    headers = {"Content-Type": "application/json", **auth(key)}
    return await request("POST", "/v1/audio/speech", json.dumps(body).encode(), headers)


def wav_of(seconds: list[tuple[float, bool]]) -> bytes:
    """A 16 kHz WAV of noise (True) and silence (False) runs."""
    rng = np.random.default_rng(1)
    parts = [
        rng.normal(0, 3000, int(s * 16000)) if loud else np.zeros(int(s * 16000))
        for s, loud in seconds
    ]
    return encode_container(np.concatenate(parts).astype(np.int16), 16000, "wav")


async def transcribe(key: str, data: bytes, **fields: str) -> Response:
    upload = io.BytesIO(data)
    upload.name = "a.wav"
    body = encode_multipart(BOUNDARY, {"model": "whisper-1", "file": upload, **fields})
    headers = {"Content-Type": MULTIPART_CONTENT, **auth(key)}
    return await request("POST", "/v1/audio/transcriptions", body, headers)


async def settled(account_id: int) -> None:
    deadline = time.monotonic() + 3
    while await open_records() or not await lease_free(account_id):
        assert time.monotonic() < deadline, "a record or the lease stayed held"
        await asyncio.sleep(0.02)


async def test_speech_pcm_is_24khz_and_metered(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    response = await speech(
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm"},
        raw,
    )
    assert response.status_code == 200 and response["content-type"] == "audio/pcm"
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert (record.status, record.tts_chars_in) == ("completed", len(TEXT))
    assert record.tts_audio_out_ms == len(response.content) // 2 * 1000 // 24000
    assert record.ttfb_ms is not None


async def test_speech_without_a_worker_is_503_with_retry_after(
    keyed: KeyMaker, settings: Any
) -> None:
    settings.TTS_WORKER_ANSWER_MS = 100
    settings.TTS_ADMISSION_WAIT_MS = 100
    api_key, raw = await keyed()
    response = await speech({"model": "tts-1", "input": TEXT, "voice": "alloy"}, raw)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "model_not_loaded"
    assert int(response["retry-after"]) >= 1
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert record.status == "failed"


async def test_speech_client_gone_midway_is_cancelled(
    slow_fake: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    body = json.dumps({"model": "tts-1", "input": "h" * 3000, "voice": "nova"}).encode()
    comm = http(
        "POST",
        "/v1/audio/speech",
        body,
        {"Content-Type": "application/json", **auth(raw)},
    )
    await comm.send_input({"type": "http.request", "body": body})
    start = await comm.receive_output(timeout=10)
    assert start["status"] == 200
    part = await comm.receive_output(timeout=5)
    assert part["more_body"] and part["body"]  # audio before the job is done
    await comm.send_input({"type": "http.disconnect"})
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert record.status == "cancelled"
    assert not slow_fake.jobs.busy("tts")
    await comm.wait(timeout=2)


async def test_transcription_of_pieces_in_order(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    # 6 s, a pause, 7 s, a pause, 3 s: three pieces (fake engine: one word per second).
    data = wav_of([(6, True), (1, False), (7, True), (1, False), (3, True)])
    response = await transcribe(raw, data, response_format="verbose_json")
    assert response.status_code == 200, response.content
    body = response.json()
    segments = body["segments"]
    assert len(segments) == 3 and 17.0 <= segments[-1]["end"] <= 18.0
    # The fake engine says one word per whole second of its piece, in one segment.
    assert [len(s["text"].split()) for s in segments] == [
        round(s["end"] - s["start"]) for s in segments
    ]
    assert [s["avg_logprob"] for s in segments] == [round(math.log(0.9), 6)] * 3
    assert body["text"] == " ".join(s["text"].strip() for s in body["segments"])
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert (record.status, record.endpoint) == ("completed", "asr")
    assert record.asr_audio_in_ms == 18_000


@pytest.mark.parametrize(
    ("detected", "language", "expected"),
    [
        ("de", None, "german"),  # what the engine decoded in, by its name
        ("de", "fr", "french"),  # a named language is the one decoded
        (None, "fr", "french"),  # an engine (or older worker) that does not say
        (None, None, "unknown"),
    ],
)
async def test_verbose_json_language_is_the_decoded_one(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    settings: Any,
    detected: str | None,
    language: str | None,
    expected: str,
) -> None:
    settings.ASR_MODEL = "whisper-tiny"  # multilingual: a request may name no language
    engine = embedded_worker.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    engine.detected = detected
    _, raw = await keyed()
    fields = {"response_format": "verbose_json"}
    if language:
        fields["language"] = language
    response = await transcribe(raw, wav_of([(2, True)]), **fields)
    assert response.status_code == 200, response.content
    assert response.json()["language"] == expected
    assert engine.calls[-1].language == language


async def test_transcription_engine_failure_is_500(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    engine = embedded_worker.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    engine.failures = 2  # the final decode and its retry
    api_key, raw = await keyed()
    response = await transcribe(raw, wav_of([(3, True)]))
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "server_error" and "fake" not in error["message"]
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert record.status == "failed"
    assert (record.asr_audio_in_ms, record.asr_items) == (0, 0)  # nothing delivered


async def test_a_stream_that_fails_bills_the_pieces_it_delivered(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = embedded_worker.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    data = wav_of([(6, True), (1, False), (7, True), (1, False), (3, True)])
    pieces = split_pieces(decode_upload(io.BytesIO(data), max_seconds=60))
    assert len(pieces) == 3
    decode = engine.decode

    async def second_piece_fails(req: AsrDecodeRequest) -> AsrHypothesis:
        if len(req.audio) == pieces[1].end - pieces[1].start:
            raise RuntimeError("fake engine failure")
        return await decode(req)

    monkeypatch.setattr(engine, "decode", second_piece_fails)
    api_key, raw = await keyed()
    response = await transcribe(raw, data, stream="true")
    assert response.status_code == 200
    events = data_events(response.content.decode())
    assert [e["type"] for e in events][-1] == "error"
    deltas = "".join(e["delta"] for e in events if e["type"].endswith(".delta"))
    assert deltas.split() == fake_transcript(6).split()  # the first piece, whole
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert (record.status, record.asr_items) == ("failed", 1)
    assert record.asr_audio_in_ms == pieces[0].end * 1000 // 16000
    assert record.asr_chars_out == len(deltas.strip())


async def test_silent_file_is_an_empty_transcript_without_a_job(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    response = await transcribe(raw, wav_of([(2, False)]), response_format="text")
    assert response.status_code == 200 and response.content == b"\n"
    await settled(api_key.account_id)


async def test_speech_checkpoints_while_the_body_streams(
    slow_fake: WorkerRuntime, keyed: KeyMaker, settings: Any
) -> None:
    """Ticks that reach the database run after the view has returned (its sync-to-async
    context closed): the record is checkpointed and completed."""
    settings.USAGE_CHECKPOINT_SECONDS = 0.2
    api_key, raw = await keyed()
    response = await speech(
        {
            "model": "tts-1",
            "input": "w" * 2000,
            "voice": "alloy",
            "response_format": "pcm",
        },
        raw,
    )
    assert response.status_code == 200
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert record.status == "completed"
    assert record.tts_audio_out_ms == len(response.content) // 2 * 1000 // 24000


async def test_verbose_json_words_have_file_times(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    _, raw = await keyed()
    data = wav_of([(6, True), (1, False), (4, True)])  # two pieces
    upload = io.BytesIO(data)
    upload.name = "a.wav"
    fields = {
        "model": "whisper-1",
        "file": upload,
        "response_format": "verbose_json",
        "timestamp_granularities[]": ["word", "segment"],
    }
    body = encode_multipart(BOUNDARY, fields)
    headers = {"Content-Type": MULTIPART_CONTENT, **auth(raw)}
    response = await request("POST", "/v1/audio/transcriptions", body, headers)
    assert response.status_code == 200, response.content
    verbose = response.json()
    words = verbose["words"]
    assert " ".join(w["word"] for w in words) == verbose["text"]
    second = verbose["segments"][1]["start"]
    # The fake engine times word i of a piece at [i, i + 1) s from the piece's start.
    assert [w["start"] for w in words] == [float(i) for i in range(6)] + [
        round(second + i, 3) for i in range(len(words) - 6)
    ]
    assert len(words) == 10
    plain = await transcribe(raw, data, response_format="verbose_json")
    assert "words" not in plain.json()


async def test_speech_sse_of_a_revoked_key_ends_with_an_error_event(
    slow_fake: WorkerRuntime, keyed: KeyMaker
) -> None:
    from channels.db import database_sync_to_async

    from accounts.models.api_keys import ApiKey
    from accounts.services.api_keys import api_key_revoke

    api_key, raw = await keyed()
    body = json.dumps(
        {
            "model": "tts-1",
            "input": "r" * 3000,
            "voice": "alloy",
            "stream_format": "sse",
        }
    ).encode()
    headers = {"Content-Type": "application/json", **auth(raw)}
    comm = http("POST", "/v1/audio/speech", body, headers)
    await comm.send_input({"type": "http.request", "body": body})
    start = await comm.receive_output(timeout=10)
    assert start["status"] == 200
    await database_sync_to_async(api_key_revoke)(
        api_key=await ApiKey.objects.aget(pk=api_key.pk), actor=None, reason="rest"
    )
    content = b""
    while True:
        part = await comm.receive_output(timeout=5)
        content += part.get("body", b"")
        if not part.get("more_body"):
            break
    events = [json.loads(line[6:]) for line in content.decode().split("\n\n") if line]
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["code"] == "invalid_api_key"
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert (record.status, record.error_code) == ("failed", "key_revoked")
    assert not slow_fake.jobs.busy("tts")


async def test_speech_flac_is_sent_whole_and_a_failure_midway_is_an_error_status(
    slow_fake: WorkerRuntime, keyed: KeyMaker
) -> None:
    """Issue 37: FLAC leaves complete, with its length; a key revoked while it is made
    gets an error status, never a truncated file. Issue 30: that file reached nobody, so
    its record bills nothing and holds the status really sent (docs/accounting.md)."""
    api_key, raw = await keyed()
    whole = await speech(
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "flac"},
        raw,
    )
    assert whole.status_code == 200
    assert int(whole["content-length"]) == len(whole.content)
    total = int.from_bytes(whole.content[18:26], "big") & (2**36 - 1)
    await settled(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert total * 1000 // 24000 == record.tts_audio_out_ms > 0
    body = {"model": "tts-1", "input": "f" * 3000, "voice": "alloy"}
    task = asyncio.ensure_future(speech({**body, "response_format": "flac"}, raw))
    await revoke_once_busy(slow_fake, api_key, reason="flac", limit_s=10)
    failed = await task
    assert failed.status_code == 401
    assert failed.json()["error"]["code"] == "invalid_api_key"
    await settled(api_key.account_id)
    records = await usage_records(api_key.account_id)
    assert len(records) == 2  # one record for the failed file, no refusal beside it
    cut = records[-1]
    assert (cut.status, cut.error_code, cut.close_code) == (
        "failed",
        "key_revoked",
        401,
    )
    assert (cut.tts_chars_in, cut.tts_audio_out_ms) == (0, 0)
    assert records[0].close_code == 200
    assert records[0].tts_chars_in == len(TEXT)
    assert not slow_fake.jobs.busy("tts")
