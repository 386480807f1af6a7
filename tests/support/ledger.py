"""The ledger of issue 30: requests on every metered route with the units the client knows it
was served, and the same totals read back from every surface that reports usage.

``LedgerClient`` makes the requests over real sockets (speech REST, the TTS socket with
incremental text and with a cancel, file transcription, realtime with server VAD, and
refusals) and keeps a ``Tally`` of what it received and sent. ``database_totals`` (a
``manage.py shell`` child, so it reads SQLite or PostgreSQL alike), ``csv_totals``,
``api_totals`` and ``page_totals`` (the dashboard in Chromium) read the same five numbers,
and ``assert_ledger`` says they all agree.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
import wave
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import websockets

from tests.support.services import run_manage

T = TypeVar("T")
SPEECH_RATE = 24_000  # /v1/audio/speech pcm
TTS_RATE = 16_000
METRICS = ("requests", "errors", "tts_chars", "tts_audio_ms", "asr_audio_ms")


@dataclass
class Tally:
    """One account's usage as a surface reports it (or as the client counted it)."""

    requests: int = 0
    errors: int = 0
    tts_chars: int = 0
    tts_audio_ms: int = 0
    asr_audio_ms: int = 0

    def add(self, **units: int) -> None:
        for name, value in units.items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class LedgerClient:
    """Requests against one gateway, tallied as the client saw them."""

    base: str  # http://127.0.0.1:PORT
    key: str
    tally: Tally = field(default_factory=Tally)
    log: list[str] = field(default_factory=list)

    @property
    def ws(self) -> str:
        return self.base.replace("http", "ws", 1)

    def _headers(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def post(
        self, path: str, body: bytes, content_type: str, key: str | None = None
    ) -> tuple[int, bytes]:
        def call() -> tuple[int, bytes]:
            headers = {**self._headers(key), "Content-Type": content_type}
            request = urllib.request.Request(self.base + path, body, headers)
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as error:
                return error.code, error.read()

        return await asyncio.to_thread(call)

    async def speech(
        self, text: str, *, voice: str = "alloy", key: str | None = None
    ) -> int:
        """``POST /v1/audio/speech`` as PCM: its status; units when it was served."""
        body = {
            "model": "tts-1",
            "input": text,
            "voice": voice,
            "response_format": "pcm",
        }
        status, audio = await self.post(
            "/v1/audio/speech", json.dumps(body).encode(), "application/json", key
        )
        self.tally.add(requests=1)
        if status == 200:
            samples = len(audio) // 2
            self.tally.add(
                tts_chars=len(text), tts_audio_ms=samples * 1000 // SPEECH_RATE
            )
        else:
            self.tally.add(errors=1)
        self.log.append(f"speech {status} {len(text)} chars")
        return status

    async def tts_incremental(self, pieces: list[str]) -> None:
        """The TTS socket: an incremental request, flushed, ended and completed."""
        async with websockets.connect(
            self.ws + "/v1/tts/ws", additional_headers=self._headers()
        ) as ws:
            start = {"event": "start", "format": "pcm", "sample_rate": TTS_RATE}
            await ws.send(json.dumps(start))
            for piece in pieces:
                await ws.send(json.dumps({"event": "text", "text": piece}))
            await ws.send(json.dumps({"event": "end"}))
            audio, last = await _tts_until_complete(ws)
        assert last["metrics"]["cancelled"] is False, last
        self.tally.add(
            requests=1,
            tts_chars=sum(len(p) for p in pieces),
            tts_audio_ms=audio // 2 * 1000 // TTS_RATE,
        )
        self.log.append(f"tts incremental {sum(len(p) for p in pieces)} chars")

    async def tts_cancelled(self, text: str) -> None:
        """The TTS socket: a request cancelled at its header, before any segment's audio
        can all have arrived: it bills the audio received and no character."""
        async with websockets.connect(
            self.ws + "/v1/tts/ws", additional_headers=self._headers()
        ) as ws:
            request = {"text": text, "format": "pcm", "sample_rate": TTS_RATE}
            await ws.send(json.dumps(request))
            header = json.loads(await ws.recv())
            assert header["event"] == "header", header
            await ws.send(json.dumps({"event": "cancel"}))
            audio, last = await _tts_until_complete(ws)
        assert last["metrics"]["cancelled"] is True, last
        self.tally.add(requests=1, tts_audio_ms=audio // 2 * 1000 // TTS_RATE)
        self.log.append(f"tts cancelled after {audio} bytes")

    async def tts_refused_by_quota(self, text: str) -> None:
        """The TTS socket: a text over the quota is refused before any audio."""
        async with websockets.connect(
            self.ws + "/v1/tts/ws", additional_headers=self._headers()
        ) as ws:
            await ws.send(json.dumps({"text": text, "format": "pcm"}))
            error = json.loads(await ws.recv())
        assert error["error"]["code"] == "QUOTA_EXCEEDED", error
        self.tally.add(requests=1, errors=1)
        self.log.append("tts refused: quota")

    async def transcribe(self, pcm16k: bytes) -> None:
        """``POST /v1/audio/transcriptions`` of a 16 kHz WAV file."""
        wav = io.BytesIO()
        with wave.open(wav, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16_000)
            out.writeframes(pcm16k)
        boundary = uuid.uuid4().hex
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n'
            "whisper-1\r\n".encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="clip.wav"\r\nContent-Type: audio/wav\r\n\r\n'.encode()
            + wav.getvalue()
            + b"\r\n",
            f"--{boundary}--\r\n".encode(),
        ]
        status, body = await self.post(
            "/v1/audio/transcriptions",
            b"".join(parts),
            f"multipart/form-data; boundary={boundary}",
        )
        assert status == 200, body[:300]
        self.tally.add(requests=1, asr_audio_ms=len(pcm16k) // 2 * 1000 // 16_000)
        self.log.append(f"transcription {json.loads(body)['text'][:30]!r}")

    async def realtime_vad(self, pcm24k: bytes) -> None:
        """``/v1/realtime`` with server VAD: speech, then silence, until its transcript."""
        audio = pcm24k + bytes(2 * int(1.2 * 24_000))
        async with websockets.connect(
            self.ws + "/v1/realtime", additional_headers=self._headers()
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            vad = {"turn_detection": {"type": "server_vad"}}
            session = {"type": "transcription", "audio": {"input": vad}}
            await ws.send(json.dumps({"type": "session.update", "session": session}))
            for i in range(0, len(audio), 9_600):  # 200 ms
                chunk = base64.b64encode(audio[i : i + 9_600]).decode()
                await ws.send(
                    json.dumps({"type": "input_audio_buffer.append", "audio": chunk})
                )
            completed = "conversation.item.input_audio_transcription.completed"
            async with asyncio.timeout(60):
                while (event := json.loads(await ws.recv()))["type"] != completed:
                    assert event["type"] != "error", event
        self.tally.add(requests=1, asr_audio_ms=len(audio) // 2 * 1000 // 24_000)
        self.log.append(f"realtime {event['transcript'][:30]!r}")

    async def bad_key(self) -> None:
        """A request with an unknown key: 401, and no account's usage."""
        body = {"model": "tts-1", "input": "Nobody's key.", "voice": "alloy"}
        status, _ = await self.post(
            "/v1/audio/speech",
            json.dumps(body).encode(),
            "application/json",
            key="vk_test_" + "x" * 38,
        )
        assert status == 401
        self.log.append("bad key 401")


QUOTA_CHARS = 2_000  # the ledger account's monthly TTS characters: one text goes over


async def mix(
    client: LedgerClient,
    *,
    tight_key: str,
    speech16k: bytes,
    speech24k: bytes,
    seed: int,
) -> None:
    """Every metered route and four refusals, in an order drawn from ``seed``."""

    async def rate_limited() -> None:  # the key allows one request a minute
        assert await client.speech("The first one is served.", key=tight_key) == 200
        assert await client.speech("The second is refused.", key=tight_key) == 429

    steps: list[Callable[[], Awaitable[Any]]] = [
        lambda: client.speech("Every unit is billed once."),
        lambda: client.tts_incremental(["The ledger is kept. ", "Nothing is lost."]),
        lambda: client.tts_cancelled(
            "This request is cancelled as soon as its header arrives so that none of "
            "its one long segment can have reached the client before the cancel did"
        ),
        lambda: client.transcribe(speech16k),
        lambda: client.realtime_vad(speech24k),
        lambda: client.speech("An unknown voice.", voice="no-such-voice"),
        lambda: client.tts_refused_by_quota("q" * (QUOTA_CHARS + 1)),
        rate_limited,
        client.bad_key,
    ]
    random.Random(seed).shuffle(steps)
    for step in steps:
        await step()


SETUP_SCRIPT = """
import json, os
from django.contrib.auth.models import User
from accounts.models.accounts import Account
from accounts.models.plans import Plan
from accounts.services.api_keys import api_key_create
plan = Plan.objects.create(name="ledger", requests_per_minute=1000,
    max_concurrent_streams=20, monthly_tts_characters=int(os.environ["LEDGER_QUOTA"]),
    monthly_asr_seconds=3600, max_session_seconds=600)
account = Account.objects.create(name="Ledger", slug="ledger", plan=plan)
_, main = api_key_create(account=account, name="main", actor=None, actor_label="ledger")
_, tight = api_key_create(account=account, name="tight", actor=None,
    actor_label="ledger", rpm_limit=1)
user = User.objects.create_user("ledger", "ledger@example.com", os.environ["LEDGER_PW"])
account.members.add(user)
print(json.dumps({"main": main, "tight": tight}))
"""
PASSWORD = "correct-horse-ledger"


def create_ledger_account(env: dict[str, str]) -> dict[str, str]:
    """The ledger account (slug ``ledger``), its keys and its member, by a child."""
    extra = {"LEDGER_QUOTA": str(QUOTA_CHARS), "LEDGER_PW": PASSWORD}
    out = run_manage("shell", "-c", SETUP_SCRIPT, env={**env, **extra})
    return dict(json.loads(out.strip().splitlines()[-1]))


async def _tts_until_complete(ws: Any) -> tuple[int, dict[str, Any]]:
    audio = 0
    async with asyncio.timeout(120):
        while True:
            message = await ws.recv()
            if isinstance(message, bytes):
                audio += len(message)
                continue
            event = json.loads(message)
            assert event["event"] != "error", event
            if event["event"] == "complete":
                return audio, event


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine in a thread of its own (Playwright's sync API owns this one)."""
    result: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(make()))  # type: ignore[arg-type]
        except BaseException as error:  # noqa: BLE001 (re-raised in the caller)
            errors.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


# Reading the totals back.

TOTALS_SCRIPT = """
import json, os
from django.db.models import Q, Sum
from django.utils import timezone
from accounts.models.accounts import Account
from accounts.models.quota import QuotaCounter
from accounts.models.rollups import AccountRollup, UsageRollup
from accounts.models.usage import UsageRecord
from accounts.services.quota import period_of
account = Account.objects.get(slug=os.environ["LEDGER_ACCOUNT"])
def sums(rows):
    s = rows.aggregate(
        n=Sum("requests"), failed=Sum("requests", filter=Q(status="failed")),
        abandoned=Sum("requests", filter=Q(status="abandoned")),
        tts_chars=Sum("tts_chars_in"), tts_audio_ms=Sum("tts_audio_out_ms"),
        asr_audio_ms=Sum("asr_audio_in_ms"))
    s = {k: int(v or 0) for k, v in s.items()}
    s["errors"] = s.pop("failed") + s.pop("abandoned")
    s["requests"] = s.pop("n")
    return s
def rollups(table, granularity):
    s = table.objects.filter(account=account, granularity=granularity).aggregate(
        n=Sum("requests"), errors=Sum("failed") + Sum("abandoned"),
        tts_chars=Sum("tts_chars_in"), tts_audio_ms=Sum("tts_audio_out_ms"),
        asr_audio_ms=Sum("asr_audio_in_ms"))
    s = {k: int(v or 0) for k, v in s.items()}
    s["requests"] = s.pop("n")
    return s
records = UsageRecord.objects.filter(account=account)
quota = {c.metric: c.used for c in QuotaCounter.objects.filter(
    account=account, period=period_of(timezone.now()))}
out = {
    "records": sums(records),
    "started": records.filter(status="started").count(),
    "quota": {"tts_chars": quota.get("tts_characters", 0),
              "asr_audio_ms": quota.get("asr_audio_ms", 0)},
    "hourly": rollups(UsageRollup, "hour"), "daily": rollups(UsageRollup, "day"),
    "account_hourly": rollups(AccountRollup, "hour"),
    "account_daily": rollups(AccountRollup, "day"),
}
print(json.dumps(out))
"""


def database_totals(env: dict[str, str], slug: str) -> dict[str, Any]:
    """Records, quota counters and rollups of ``slug``, read by a ``manage.py`` child."""
    out = run_manage("shell", "-c", TOTALS_SCRIPT, env={**env, "LEDGER_ACCOUNT": slug})
    return dict(json.loads(out.strip().splitlines()[-1]))


def tally_of(values: dict[str, int]) -> Tally:
    return Tally(**{name: int(values.get(name, 0)) for name in METRICS})


def today_range() -> tuple[str, str]:
    """Yesterday and today (UTC): a run that crosses midnight still sees everything."""
    today = datetime.now(UTC).date()
    return (today - timedelta(days=1)).isoformat(), today.isoformat()


def csv_totals(text: str) -> Tally:
    rows = list(csv.DictReader(io.StringIO(text)))
    return Tally(
        requests=sum(int(r["requests"]) for r in rows),
        errors=sum(int(r["errors"]) for r in rows),
        tts_chars=sum(int(r["tts_characters"]) for r in rows),
        tts_audio_ms=int(sum(Decimal(r["tts_audio_seconds"]) for r in rows) * 1000),
        asr_audio_ms=int(sum(Decimal(r["asr_audio_seconds"]) for r in rows) * 1000),
    )


def api_totals(base: str, key: str) -> dict[str, int]:
    """The usage API's totals (its seconds are whole: compared rounded)."""
    first, _ = today_range()
    start = int(datetime.fromisoformat(first).replace(tzinfo=UTC).timestamp())
    totals = {"requests": 0, "tts_chars": 0, "asr_seconds": 0}
    for kind in ("audio_speeches", "audio_transcriptions"):
        url = f"{base}/v1/organization/usage/{kind}?start_time={start}&bucket_width=1d"
        request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            page = json.loads(response.read())
        for bucket in page["data"]:
            for result in bucket["results"]:
                totals["requests"] += result["num_model_requests"]
                totals["tts_chars"] += result.get("characters", 0)
                totals["asr_seconds"] += result.get("seconds", 0)
    return totals


def page_totals(page: Any) -> Tally:
    """The cards of the usage page open in ``page`` (their exact ``data-value``)."""

    def card(metric: str) -> int:
        return int(page.get_attribute(f"#cards [data-metric={metric}]", "data-value"))

    return Tally(
        requests=card("requests"),
        errors=card("errors"),
        tts_chars=card("tts_chars_in"),
        tts_audio_ms=card("tts_audio_out_ms"),
        asr_audio_ms=card("asr_audio_in_ms"),
    )


def sign_in(context: Any, base: str, username: str, password: str) -> Any:
    page = context.new_page()
    page.goto(base + "/dashboard/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def wait_page(page: Any, url: str, expected: Tally, limit_s: float = 60) -> float:
    """Reload the usage page until its cards show ``expected``; the seconds it took."""
    started = time.monotonic()
    while True:
        page.goto(url)
        shown = page_totals(page)
        if shown == expected or time.monotonic() - started > limit_s:
            assert shown == expected, (shown, expected)
            return time.monotonic() - started
        time.sleep(0.2)


def assert_ledger(client: Tally, surfaces: dict[str, Tally]) -> None:
    """Every surface reports exactly what the client was served."""
    differing = {name: asdict(t) for name, t in surfaces.items() if t != client}
    assert not differing, f"client {asdict(client)}; differing: {differing}"


def verify(
    *, base: str, env: dict[str, str], client: LedgerClient, context: Any, ended: float
) -> dict[str, Any]:
    """Check every surface against the client's tally; what was measured.

    ``ended``: ``time.monotonic()`` when the last request ended; the freshness is the time
    from then until the dashboard, loaded in Chromium, showed every request.
    """
    expected = client.tally
    page = sign_in(context, base, "ledger", PASSWORD)
    first, last = today_range()
    query = f"from={first}&to={last}&tz=UTC"
    wait_page(page, f"{base}/dashboard/ledger/usage/?{query}", expected)
    freshness = time.monotonic() - ended
    shown = page_totals(page)
    csv_text = page.request.get(f"{base}/dashboard/ledger/usage.csv?{query}").text()
    # By hour the export writes its numbers in SQL (accounts.selectors.export.CountedText)
    hourly_csv = page.request.get(
        f"{base}/dashboard/ledger/usage.csv?{query}&granularity=hour"
    ).text()
    db = database_totals(env, "ledger")
    surfaces = {
        "records": tally_of(db["records"]),
        "hourly rollups": tally_of(db["hourly"]),
        "daily rollups": tally_of(db["daily"]),
        "account hourly rollups": tally_of(db["account_hourly"]),
        "account daily rollups": tally_of(db["account_daily"]),
        "csv": csv_totals(csv_text),
        "csv by hour": csv_totals(hourly_csv),
        "dashboard": shown,
    }
    assert_ledger(expected, surfaces)
    assert db["started"] == 0, db
    assert db["quota"] == {
        "tts_chars": expected.tts_chars,
        "asr_audio_ms": expected.asr_audio_ms,
    }, db["quota"]
    api = api_totals(base, client.key)
    assert (
        api
        == {
            "requests": expected.requests,
            "tts_chars": expected.tts_chars,
            "asr_seconds": round(expected.asr_audio_ms / 1000),
        }
        or abs(api["asr_seconds"] * 1000 - expected.asr_audio_ms) <= 1000
    ), api
    return {"expected": asdict(expected), "freshness_s": round(freshness, 2)}


def ledger_speech() -> tuple[bytes, bytes]:
    """Piper speech at 16 kHz (the file) and 24 kHz (the realtime session)."""
    from tests.asr.conftest import synthesize

    (clip,) = synthesize(["Please read the meter every morning."])
    return clip.bytes_at(16_000), clip.bytes_at(24_000)


def run_ledger(
    topology: str,
    *,
    base: str,
    env: dict[str, str],
    context: Any,
    speech: tuple[bytes, bytes],
) -> None:
    """The whole ledger test against one topology: account, mix, every surface."""
    from tests.e2e.conftest import screenshot

    keys = create_ledger_account(env)
    client = LedgerClient(base, keys["main"])
    seed = random.randrange(10_000)
    speech16k, speech24k = speech
    run_async(
        lambda: mix(
            client,
            tight_key=keys["tight"],
            speech16k=speech16k,
            speech24k=speech24k,
            seed=seed,
        )
    )
    ended = time.monotonic()
    measured = verify(base=base, env=env, client=client, context=context, ended=ended)
    screenshot(context.pages[-1], f"ledger-{topology}")
    print(f"\nLEDGER {topology} seed {seed}: {measured}; {'; '.join(client.log)}")
