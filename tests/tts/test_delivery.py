"""Billing what was delivered (issue 30, docs/accounting.md): the pure rules of
``tts.delivery`` and the socket, where a cancelled request bills only its delivered segments
and a cleared text is not billed at all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from accounts.models.usage import UsageRecord
from tests.conftest import KeyMaker
from tests.tts.conftest import Opener, chars_used, pcm_ms
from tests.tts.test_metering import RATE, audio_frames, connect, request
from tts.delivery import Billed, Delivery
from veena_site.runtime import WorkerRuntime

# Pure rules.


def delivered(*frames: tuple[int, int, int]) -> Delivery:
    """A delivery of frames ``(bytes, samples, segment chars)``."""
    d = Delivery(sample_rate=16000)
    for nbytes, samples, chars in frames:
        d.frame(nbytes, samples, segment_chars=chars)
    return d


def test_completed_request_bills_all_accepted_characters_less_cleared() -> None:
    d = delivered((44, 0, 0), (200, 100, 0), (200, 100, 30))
    d.cleared(12)
    assert d.billed(completed=True, accepted_chars=50, unsent=0) == Billed(
        38, 200, 16000
    )


def test_other_ends_bill_only_whole_segments_delivered() -> None:
    d = delivered((200, 100, 0), (200, 100, 30), (200, 100, 0))
    assert d.billed(completed=False, accepted_chars=90, unsent=0) == Billed(
        30, 300, 16000
    )


def test_unsent_bytes_are_not_billed_nor_the_segment_they_end() -> None:
    d = delivered((200, 100, 20), (200, 100, 0), (200, 100, 25))
    # 300 of the 600 bytes never left: half the second frame and all the third.
    assert d.billed(completed=False, accepted_chars=45, unsent=300) == Billed(
        20, 150, 16000
    )
    # A completed request whose tail never left bills as any other end.
    assert d.billed(completed=True, accepted_chars=45, unsent=1) == Billed(
        20, 299, 16000
    )


def test_a_cut_frame_bills_its_delivered_part_rounded_down() -> None:
    d = delivered((3, 3, 0))
    assert d.billed(completed=False, accepted_chars=0, unsent=2).samples == 1
    assert d.billed(completed=False, accepted_chars=0, unsent=10).samples == 0


# The socket.


async def aenumerate(items: Any) -> Any:
    index = 0
    async for item in items:
        yield index, item
        index += 1


pytestmark_db = pytest.mark.django_db(transaction=True)
SENTENCES = "First sentence is here. Second sentence follows now. Third one ends it."


@pytestmark_db
async def test_cancel_bills_only_the_segments_whose_audio_reached_the_client(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    engine = embedded_worker.engines["tts"].engine
    original = engine.stream
    calls = 0

    async def second_segment_hangs(req: Any) -> Any:
        nonlocal calls
        calls += 1
        async for index, pcm in aenumerate(original(req)):
            yield pcm
            if calls == 2 and index == 1:  # the worker holds the last frame it has
                await asyncio.sleep(30)  # the cancel stops it here

    engine.stream = second_segment_hangs
    api_key, raw = await keyed({"monthly_tts_characters": 10_000})
    stream = await connect(open_stream, raw)
    await stream.send(
        request(SENTENCES, request_id="cut", timestamps=True, chunking=True)
    )
    first = await stream.event("segment_start")
    await stream.event("segment_end")
    await stream.event("segment_start")
    await stream.until(lambda item: item[0] == "bytes")
    await stream.send({"event": "cancel"})
    complete = await stream.event("complete")
    assert complete["metrics"]["cancelled"] is True
    record = await UsageRecord.objects.aget(request_id="cut")
    assert record.status == "cancelled"
    assert record.tts_chars_in == first["char_end"] - first["char_start"]
    assert record.tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE)
    assert await chars_used(api_key.account_id) == record.tts_chars_in


@pytestmark_db
async def test_cleared_incremental_text_is_not_billed(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 10_000})
    stream = await connect(open_stream, raw)
    start = {"event": "start", "request_id": "inc", "format": "pcm"}
    await stream.send({**start, "sample_rate": RATE})
    await stream.event("header")
    spoken = "This sentence is spoken in full."
    await stream.send({"event": "text", "text": spoken})
    await stream.send({"event": "flush"})
    await stream.event("flushed")
    await stream.send({"event": "text", "text": " This text is cleared before"})
    await stream.send({"event": "clear"})
    await stream.event("cleared")
    await stream.send({"event": "end"})
    complete = await stream.event("complete")
    assert complete["metrics"]["cancelled"] is False
    record = await UsageRecord.objects.aget(request_id="inc")
    assert (record.status, record.tts_chars_in) == ("completed", len(spoken))
    assert await chars_used(api_key.account_id) == len(spoken)
