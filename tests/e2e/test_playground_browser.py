"""The playground in headless Chromium against a gateway with the real engines (issue 16).

The gateway runs Piper and faster-whisper on this run's test database. Chromium's fake
microphone plays a WAV of Piper speech made through the server (``POST /v1/tts``), padded
with silence, in a loop. What is asserted is read from the page (its player's sample
counters, its transcript, its metrics) and from the usage records the gateway wrote.
"""

from __future__ import annotations

import io
import json
import re
import time
import urllib.request
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import gateway_on_test_db, record_foreign_requests, screenshot
from tests.support.members import account_member
from tests.wer import word_error_rate

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

SECRET_TTL_S = 10  # the least a client secret lives
PASSWORD = "correct-horse-battery"
SPOKEN = (
    "Please read the meter every morning and write the numbers in the blue notebook."
)
LEAD_SILENCE_S, TAIL_SILENCE_S = 1.0, 2.0
KEY_SHAPED = re.compile(r"vk_[a-z]+_")


@pytest.fixture(scope="module")
def engine_gateway(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Any:
    with gateway_on_test_db(
        tmp_path_factory,
        django_db_blocker,
        settings_module="tests.e2e.engine_settings",
        wait_path="/readyz",
        GATEWAY_KINDS="tts,asr",
        PLAYGROUND_TOKEN_TTL_SECONDS=str(SECRET_TTL_S),
    ) as url:
        yield url


@dataclass(frozen=True)
class Speech:
    path: Path
    speech_s: float


@pytest.fixture(scope="module")
def speech(
    engine_gateway: str, django_db_blocker: Any, tmp_path_factory: Any
) -> Speech:
    """SPOKEN by Piper through the server as 16-bit PCM at 48 kHz, between silences."""
    from accounts.services.accounts import (
        account_get_or_create,
        plan_get_or_create_default,
    )
    from accounts.services.api_keys import api_key_create

    with django_db_blocker.unblock():
        account = account_get_or_create(
            name="microphone-source", plan=plan_get_or_create_default()
        )
        _, raw = api_key_create(
            account=account, name="wav", actor=None, actor_label="tests"
        )
    request = urllib.request.Request(
        engine_gateway + "/v1/tts",
        data=json.dumps(
            {"text": SPOKEN, "format": "wav", "sample_rate": 48000}
        ).encode(),
        headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
    with wave.open(io.BytesIO(body)) as w:
        assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (48000, 2, 1)
        pcm = w.readframes(w.getnframes())
    path = tmp_path_factory.mktemp("microphone") / "speech.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48000)
        out.writeframes(
            bytes(int(48000 * LEAD_SILENCE_S) * 2)
            + pcm
            + bytes(int(48000 * TAIL_SILENCE_S) * 2)
        )
    return Speech(path=path, speech_s=len(pcm) / 2 / 48000)


@pytest.fixture(scope="module")
def chromium_extra_args(speech: Speech) -> list[str]:
    return [
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={speech.path}",
    ]


@dataclass(frozen=True)
class Member:
    user: Any
    account: Any
    raw_key: str


@pytest.fixture
def member(engine_gateway: str) -> Member:
    """A member of ``acme``, which also has an ordinary key the page must never show."""
    from accounts.services.api_keys import api_key_create

    user, account = account_member("mia", PASSWORD)
    _, raw = api_key_create(
        account=account, name="production", actor=None, actor_label="tests"
    )
    return Member(user=user, account=account, raw_key=raw)


def open_playground(context: Any, base: str) -> Any:
    """Sign in through /playground/ and land on the member's only account."""
    page = context.new_page()
    record_foreign_requests(page, base)
    page.goto(base + "/playground/")
    assert "/dashboard/login/" in page.url
    page.fill("input[name=username]", "mia")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/playground/acme/")
    page.wait_for_selector("#tts-play:not([disabled])")
    return page


def finished_records(member: Member, endpoint: str) -> list[Any]:
    """The account's usage records of ``endpoint``, once the gateway has finalized them
    (it does on seeing the close, a moment after the page is done)."""
    from accounts.models.usage import UsageRecord

    records = UsageRecord.objects.filter(account=member.account, endpoint=endpoint)
    deadline = time.monotonic() + 15
    while records.filter(status="started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(records.select_related("api_key"))


def dataset(page: Any, element_id: str) -> dict[str, str]:
    return page.evaluate(
        f"() => ({{...document.getElementById('{element_id}').dataset}})"
    )


def test_tts_plays_the_samples_of_the_complete_metrics_and_usage_says_playground(
    engine_gateway: str, member: Member, browser_context: Any, tmp_path: Path
) -> None:
    from accounts.models.choices import KeyKind
    from accounts.services.rollups import usage_rollup

    page = open_playground(browser_context, engine_gateway)
    text = "Hello from the playground. This sentence streams while it plays."
    page.fill("#tts-text", text)
    page.select_option("#tts-format", "wav")
    page.select_option("#tts-rate", "24000")
    page.click("#tts-play")
    page.wait_for_selector("#tts-metrics[data-total-bytes]", timeout=60_000)
    metrics = dataset(page, "tts-metrics")
    shown = {
        name: page.get_attribute(f"#tts-metrics dd[data-metric={name}]", "data-value")
        for name in ("ttfb_ms", "rtf", "audio_duration_seconds")
    }
    player = dataset(page, "tts-player")
    samples = int(player["samples"])
    assert player["sampleRate"] == "24000"
    assert metrics["cancelled"] == "false"
    assert (
        samples == (int(metrics["totalBytes"]) - 44) // 2
    )  # every PCM byte, no header
    assert samples / 24000 == pytest.approx(
        float(shown["audio_duration_seconds"]), abs=0.006
    )
    screenshot(page, "playground-tts")

    # It really plays: the context's sources finish, every sample of them.
    page.wait_for_function(
        f"() => Number(document.getElementById('tts-player').dataset.playedSamples) >= {samples}",
        timeout=(samples / 24000 + 20) * 1000,
    )
    with page.expect_download() as download:
        page.click("#tts-download")
    with wave.open(str(download.value.path())) as w:
        assert (w.getframerate(), w.getnframes()) == (24000, samples)

    (record,) = finished_records(member, "tts")
    assert record.api_key.kind == KeyKind.PLAYGROUND
    assert record.tts_chars_in == len(text) and record.status == "completed"
    assert record.ttfb_ms == int(shown["ttfb_ms"])  # shown = metered (tts E5)
    assert record.rtf == pytest.approx(float(shown["rtf"]), abs=0.0011)

    usage_rollup(granularity="hour")
    usage_rollup(granularity="day")
    page.goto(engine_gateway + f"/dashboard/{member.account.slug}/usage/?tz=UTC")
    labels = page.locator("#by-key tbody tr td:first-child").all_inner_texts()
    assert labels == ["playground"]
    screenshot(page, "playground-usage")
    assert page.foreign_requests == []


def transcripts(page: Any) -> list[str]:
    return page.locator("#asr-transcript li[data-state=final]").all_inner_texts()


def watch_partials(page: Any) -> None:
    """Record every partial (delta) text the transcript shows, for the test to read."""
    page.evaluate(
        """() => {
            window.partials = [];
            new MutationObserver(() => {
                for (const li of document.querySelectorAll('#asr-transcript li[data-state=partial]')) {
                    if (li.textContent) window.partials.push(li.textContent);
                }
            }).observe(document.getElementById('asr-transcript'),
                       {subtree: true, childList: true, characterData: true});
        }"""
    )


def test_microphone_with_server_vad_is_transcribed_turn_after_turn(
    engine_gateway: str, member: Member, browser_context: Any, speech: Speech
) -> None:
    from accounts.models.choices import KeyKind

    page = open_playground(browser_context, engine_gateway)
    watch_partials(page)
    assert page.is_checked("#asr-vad")
    page.click("#asr-start")
    loop_s = LEAD_SILENCE_S + speech.speech_s + TAIL_SILENCE_S
    page.wait_for_function(
        "() => Number(document.getElementById('asr-transcript').dataset.completed) >= 2",
        timeout=(2 * loop_s + 30) * 1000,
    )
    screenshot(page, "playground-asr-vad")
    turns = transcripts(page)
    rates = [word_error_rate(SPOKEN, turn) for turn in turns[:2]]
    print(f"server VAD turns: {turns[:2]} WER {rates}")
    assert all(rate <= 0.15 for rate in rates), turns
    assert page.evaluate("window.partials.length") > 0  # deltas showed before the final
    page.click("#asr-stop")
    page.wait_for_function(
        "() => document.getElementById('asr-state').textContent === 'Microphone off.'",
        timeout=20_000,
    )
    (record,) = finished_records(member, "asr")
    assert record.api_key.kind == KeyKind.PLAYGROUND and record.status == "completed"
    assert record.asr_items >= 2


def test_microphone_without_vad_ends_the_turn_on_request(
    engine_gateway: str, member: Member, browser_context: Any, speech: Speech
) -> None:
    page = open_playground(browser_context, engine_gateway)
    page.uncheck("#asr-vad")
    page.click("#asr-start")
    # Past the end of the speech, inside the file's trailing silence.
    sent_ms = int((LEAD_SILENCE_S + speech.speech_s + 0.6) * 1000)
    page.wait_for_function(
        f"() => Number(document.getElementById('asr-state').dataset.sentMs) >= {sent_ms}",
        timeout=sent_ms + 30_000,
    )
    assert transcripts(page) == []  # nothing completes before the turn ends
    page.click("#asr-commit")
    page.wait_for_function(
        "() => Number(document.getElementById('asr-transcript').dataset.completed) >= 1",
        timeout=30_000,
    )
    (turn,) = transcripts(page)
    rate = word_error_rate(SPOKEN, turn)
    print(f"manual turn: {turn!r} WER {rate}")
    assert rate <= 0.15, turn
    screenshot(page, "playground-asr-manual")
    page.click("#asr-stop")


PROBE = """async ([url, protocols, first]) => new Promise((resolve) => {
    const ws = new WebSocket(url, protocols);
    const events = [];
    ws.onopen = () => first && ws.send(first);
    ws.onmessage = (m) => {
        events.push(JSON.parse(m.data));
        const e = events[0];
        if (e.event !== 'error' && e.type !== 'error') ws.close(1000);
    };
    ws.onclose = (c) => resolve({events, code: c.code, protocol: ws.protocol});
})"""


def mint(page: Any, use: str) -> str:
    return page.evaluate(
        """async (use) => {
            const config = JSON.parse(document.getElementById('playground-config').textContent);
            const csrf = document.querySelector('#csrf [name=csrfmiddlewaretoken]').value;
            const r = await fetch(config.secretUrl,
                {method: 'POST', headers: {'X-CSRFToken': csrf}, body: new URLSearchParams({use})});
            return (await r.json()).value;
        }""",
        use,
    )


def probe(
    page: Any, base: str, tts_secret: str, realtime_secret: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    ws = "ws://" + urlsplit(base).netloc
    tts = page.evaluate(
        PROBE,
        [
            ws + "/v1/tts/ws",
            ["veena-tts", f"veena-api-key.{tts_secret}"],
            '{"event":"ping"}',
        ],
    )
    realtime = page.evaluate(
        PROBE,
        [
            ws + "/v1/realtime",
            ["realtime", f"openai-insecure-api-key.{realtime_secret}"],
            None,
        ],
    )
    return tts, realtime


def test_secrets_open_their_own_socket_until_they_expire_then_are_refused(
    engine_gateway: str, member: Member, browser_context: Any
) -> None:
    page = open_playground(browser_context, engine_gateway)
    minted_at = time.monotonic()
    tts_secret, realtime_secret = mint(page, "tts"), mint(page, "realtime")
    tts, realtime = probe(page, engine_gateway, tts_secret, realtime_secret)
    assert tts["events"] == [{"event": "pong"}] and tts["protocol"] == "veena-tts"
    assert realtime["events"][0]["type"] == "session.created"
    assert realtime["protocol"] == "realtime"
    # Each opens only its own socket.
    tts, realtime = probe(page, engine_gateway, realtime_secret, tts_secret)
    assert tts["events"][0]["error"]["code"] == "AUTH_FAILED"
    assert realtime["events"][0]["error"]["code"] == "invalid_api_key"

    time.sleep(max(0.0, SECRET_TTL_S + 0.5 - (time.monotonic() - minted_at)))
    tts, realtime = probe(page, engine_gateway, tts_secret, realtime_secret)
    assert tts["events"][0]["error"]["code"] == "AUTH_FAILED" and tts["code"] == 1008
    assert realtime["events"][0]["error"]["code"] == "invalid_api_key"
    assert realtime["code"] == 1008
    # The page recovers by itself: it mints again for the next play.
    page.fill("#tts-text", "Still here.")
    page.click("#tts-play")
    page.wait_for_selector("#tts-metrics[data-total-bytes]", timeout=60_000)
    assert dataset(page, "tts-metrics")["cancelled"] == "false"


def test_the_page_never_carries_a_key(
    engine_gateway: str, member: Member, browser_context: Any
) -> None:
    page = open_playground(browser_context, engine_gateway)
    source = page.goto(page.url).text()
    page.wait_for_selector("#tts-play:not([disabled])")
    screenshot(page, "playground-page")
    for html in (source, page.content()):
        assert member.raw_key not in html
        assert not KEY_SHAPED.search(html)  # no key of any kind, not even its display
        assert "ek_" not in html  # a client secret lives in a script variable only
    assert page.foreign_requests == []
