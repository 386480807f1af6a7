"""Every audio format of ``/v1/audio/speech`` and ``/v1/tts`` through three decoders (issue 37).

Each format is fetched once per way a client receives it, from the real engine (Piper):
``/v1/audio/speech`` as its streamed body and as SSE deltas, ``/v1/tts`` as its whole body
and as the ``/v1/tts/ws`` frames. Each body then goes through libsndfile (python-soundfile,
``sf.read`` of the bytes, as a user would), PyAV/FFmpeg (reading it as a pipe, without
seeking) and Chromium's ``decodeAudioData`` (Playwright). Every decoder must return all of
the audio the gateway metered, and every length a header states must be the true one.

Pairs that no client can decode are listed in ``CANNOT`` with the reason, and a test
checks each reason still holds (libsndfile has no AAC decoder; a headerless body gives
``decodeAudioData`` nothing to read).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import av
import httpx
import numpy as np
import pytest
import soundfile as sf

from openai_rest.encode import RESPONSE_FORMATS
from tests.e2e.conftest import chromium, chromium_extra_args  # noqa: F401 (fixtures)
from tests.openai_rest.conftest import RestGateway

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

TEXT = "Every decoder reads this. It comes in pieces. The last word is here."
SPEECH_RATE = 24_000
TTS_RATES = {"wav": 16_000, "pcm": 22_050, "mulaw": 8000}
# Lossy codecs add their priming and pad the last frame: at most this much audio more.
SLACK_S = {"mp3": 0.15, "aac": 0.15, "opus": 0.03}
DECODERS = ("libsndfile", "pyav", "chromium")
CANNOT = {
    ("libsndfile", "aac"): "libsndfile has no AAC (or MP4) decoder",
    ("chromium", "pcm"): "headerless: decodeAudioData has no rate or encoding to read",
    (
        "chromium",
        "mulaw",
    ): "headerless: decodeAudioData has no rate or encoding to read",
}


@dataclass(frozen=True)
class Case:
    """One format as one client receives it."""

    endpoint: str  # speech | tts
    delivery: str  # audio | sse (speech); rest | ws (tts)
    fmt: str

    @property
    def rate(self) -> int:
        return SPEECH_RATE if self.endpoint == "speech" else TTS_RATES[self.fmt]

    def __str__(self) -> str:
        return f"{self.endpoint}-{self.delivery}-{self.fmt}"


CASES = [
    *(Case("speech", d, f) for d in ("audio", "sse") for f in RESPONSE_FORMATS),
    *(Case("tts", d, f) for d in ("rest", "ws") for f in TTS_RATES),
]


@dataclass
class Fetched:
    """A body, its response headers, and the audio the gateway metered for it."""

    body: bytes
    headers: dict[str, str]
    request_id: str
    true_s: float = 0.0


def speech(gw: RestGateway, case: Case) -> Fetched:
    """``POST /v1/audio/speech``, read chunk by chunk as it streams."""
    payload = {
        "model": "tts-1",
        "voice": "alloy",
        "input": TEXT,
        "response_format": case.fmt,
        "stream_format": case.delivery,
    }
    auth = {"Authorization": f"Bearer {gw.keys['rest-open']}"}
    url = gw.base_url + "/audio/speech"
    with httpx.stream("POST", url, json=payload, headers=auth, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        body = b"".join(resp.iter_bytes())
        headers = dict(resp.headers)
    if case.delivery == "sse":
        events = [json.loads(line[6:]) for line in body.decode().splitlines() if line]
        assert events[-1]["type"] == "speech.audio.done"
        body = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    return Fetched(body, headers, headers["x-request-id"])


def tts_rest(gw: RestGateway, case: Case) -> Fetched:
    """``POST /v1/tts``: the whole body."""
    resp = httpx.post(
        f"http://127.0.0.1:{gw.port}/v1/tts",
        json={"text": TEXT, "format": case.fmt, "sample_rate": case.rate},
        headers={"Authorization": f"Bearer {gw.keys['rest-open']}"},
        timeout=120,
    )
    assert resp.status_code == 200, resp.text
    return Fetched(resp.content, dict(resp.headers), resp.headers["x-request-id"])


def tts_ws(gw: RestGateway, case: Case) -> Fetched:
    """``/v1/tts/ws``: the frames of one request, joined."""
    from websockets.sync.client import connect

    frames: list[bytes] = []
    with connect(
        f"ws://127.0.0.1:{gw.port}/v1/tts/ws",
        additional_headers={"Authorization": f"Bearer {gw.keys['rest-open']}"},
    ) as ws:
        ws.send(
            json.dumps({"text": TEXT, "format": case.fmt, "sample_rate": case.rate})
        )
        while True:
            message = ws.recv(timeout=120)
            if isinstance(message, bytes):
                frames.append(message)
                continue
            event = json.loads(message)
            assert event["event"] != "error", event
            if event["event"] == "header":
                request_id = event["request_id"]
            if event["event"] == "complete":
                break
    return Fetched(b"".join(frames), {}, request_id)


def metered_ms(gw: RestGateway) -> dict[str, int]:
    """request_id → the audio the usage record counts (ms)."""
    code = (
        "from accounts.models.usage import UsageRecord; import json; print(json.dumps("
        "dict(UsageRecord.objects.filter(endpoint='tts').values_list("
        "'request_id', 'tts_audio_out_ms'))))"
    )
    return dict(json.loads(gw.manage_py("shell", "-c", code).stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def bodies(rest_gateway: RestGateway) -> dict[str, Fetched]:
    """Every case fetched once; each body knows the audio metered for it."""
    fetch = {"audio": speech, "sse": speech, "rest": tts_rest, "ws": tts_ws}
    fetched = {str(case): fetch[case.delivery](rest_gateway, case) for case in CASES}
    metered = metered_ms(rest_gateway)
    for got in fetched.values():
        got.true_s = metered[got.request_id] / 1000
        assert got.true_s > 2.0
    return fetched


class Pipe(io.RawIOBase):
    """The bytes as a pipe: readable once, front to back, no seeking."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._data) - self._at, 4096)
        buffer[:n] = self._data[self._at : self._at + n]
        self._at += n
        return n


def decode_libsndfile(case: Case, body: bytes) -> tuple[np.ndarray, int]:
    if case.fmt in ("pcm", "mulaw"):
        subtype = "PCM_16" if case.fmt == "pcm" else "ULAW"
        raw = {"format": "RAW", "subtype": subtype, "channels": 1}
        return sf.read(io.BytesIO(body), samplerate=case.rate, **raw)  # type: ignore[no-any-return]
    return sf.read(io.BytesIO(body))  # type: ignore[no-any-return]


def decode_pyav(case: Case, body: bytes) -> tuple[np.ndarray, int]:
    fmt = {"pcm": "s16le", "mulaw": "mulaw"}.get(case.fmt)
    options = {"sample_rate": str(case.rate)} if fmt else {}
    with av.open(Pipe(body), format=fmt, options=options) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        blocks = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
    samples = np.concatenate(blocks).astype(np.float64)
    if np.abs(samples).max() > 2:  # integer sample formats
        samples = samples / 32768
    return samples, rate


DECODE_JS = """async ([b64, rate]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const context = new OfflineAudioContext(1, 1, rate);
  const buffer = await context.decodeAudioData(bytes.buffer);
  const data = buffer.getChannelData(0);
  let sum = 0;
  for (const x of data) sum += x * x;
  return { length: buffer.length, rate: buffer.sampleRate, rms: Math.sqrt(sum / data.length) };
}"""


@pytest.fixture(scope="module")
def page(chromium: Any) -> Iterator[Any]:  # noqa: F811 (the imported fixture)
    context = chromium.new_context()
    tab = context.new_page()
    tab.goto("about:blank")
    yield tab
    context.close()


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def decoded(decoder: str, case: Case, body: bytes, page: Any) -> tuple[float, float]:
    """Seconds of audio and its RMS, as the decoder returns them."""
    if decoder == "chromium":
        rate = 48_000 if case.fmt == "opus" else case.rate
        out = page.evaluate(DECODE_JS, [base64.b64encode(body).decode(), rate])
        return out["length"] / out["rate"], out["rms"]
    decode = decode_libsndfile if decoder == "libsndfile" else decode_pyav
    samples, rate = decode(case, body)
    return len(samples) / rate, rms(samples)


def stated_samples(case: Case, fetched: Fetched) -> int | None:
    """The length the body's header states (None: it states none, or "unknown")."""
    body = fetched.body
    if case.fmt == "wav":
        riff, data = (
            struct.unpack_from("<I", body, 4)[0],
            struct.unpack_from("<I", body, 40)[0],
        )
        if (riff, data) == (0xFFFFFFFF, 0xFFFFFFFF):
            return None
        assert riff == len(body) - 8 and data == len(body) - 44
        return data // 2
    if case.fmt == "flac":
        assert body[:4] == b"fLaC"
        total = int.from_bytes(body[8 + 10 : 8 + 18], "big") & (2**36 - 1)
        return total or None
    return None


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_decoder_reads_all_the_audio(
    bodies: dict[str, Fetched], page: Any, case: Case, decoder: str
) -> None:
    if (decoder, case.fmt) in CANNOT:
        pytest.skip(CANNOT[decoder, case.fmt])
    fetched = bodies[str(case)]
    seconds, level = decoded(decoder, case, fetched.body, page)
    slack = SLACK_S.get(case.fmt, 0.002)
    assert fetched.true_s - 0.002 <= seconds <= fetched.true_s + slack, (
        decoder,
        seconds,
        fetched.true_s,
    )
    reference = rms(decode_pyav(case, fetched.body)[0])
    assert level == pytest.approx(reference, rel=0.05)  # the same audio, not silence
    assert level > 0.01


@pytest.mark.parametrize("case", CASES, ids=str)
def test_stated_lengths_are_true(bodies: dict[str, Fetched], case: Case) -> None:
    fetched = bodies[str(case)]
    stated = stated_samples(case, fetched)
    whole = case.delivery == "rest" or (
        case.fmt == "flac" and case.endpoint == "speech"
    )
    if whole and case.fmt in ("wav", "flac"):
        assert stated is not None  # a whole file says how long it is
    if stated is not None:
        assert stated / case.rate == pytest.approx(fetched.true_s, abs=0.0015)
    if "content-length" in fetched.headers and case.delivery != "sse":
        assert int(fetched.headers["content-length"]) == len(fetched.body)
    if case == Case("speech", "audio", "flac"):  # sent whole: its size is known
        assert "content-length" in fetched.headers
    if case.delivery == "rest":
        duration = float(fetched.headers["x-audio-duration-seconds"])
        assert duration == pytest.approx(fetched.true_s, abs=0.006)


def test_what_cannot_be_decoded_still_cannot(page: Any) -> None:
    formats = {name.upper() for name in sf.available_formats()}
    assert not formats & {"AAC", "M4A", "MP4", "ADTS"}  # CANNOT's libsndfile reason
    pcm = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2").tobytes()
    with pytest.raises(Exception, match="Unable to decode"):
        page.evaluate(DECODE_JS, [base64.b64encode(pcm).decode(), 16_000])
