"""``veena say`` / ``veena transcribe`` against a real ``make serve`` (Piper, faster-whisper).

One service for the module. A 5,000-character book becomes a WAV whose length is the sum of
its requests' ``complete`` metrics and whose transcript by ``veena transcribe`` has WER ≤ 15 %.
A TCP proxy resets the connection once in mid-segment: the resumed file has every segment once
(by the report's segment list, and by its length against an uninterrupted run, since Piper's
durations vary by about 1 % run to run, well under half a segment). A killed CLI resumes from
its state file. Expected failures are one line with the documented exit status.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env, free_port
from tests.e2e.test_serve import mint_key, serve, stop, wait_ready
from tests.support.proxy import DroppingProxy
from tests.wer import word_error_rate

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

VEENA = str(ROOT / ".venv/bin/veena")
BOOK = (ROOT / "tests/cli/book.txt").read_text()
RATE = 16000


@dataclass(frozen=True)
class Service:
    port: int
    key: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    data = tmp_path_factory.mktemp("serve")
    port = free_port()
    proc = serve(data, port)
    try:
        wait_ready(port, proc)
        yield Service(port, mint_key(data))
    finally:
        stop(proc)
    assert "vk_live_" not in (data / "serve.log").read_text()


def veena(
    *args: str, key: str | None = None, url: str | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = child_env(VEENA_API_KEY=key or "", VEENA_URL=url or "")
    return subprocess.run(
        [VEENA, *args], env=env, capture_output=True, text=True, timeout=600, **kwargs
    )


def wav_seconds(path: Path) -> float:
    with wave.open(str(path)) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1
        return w.getnframes() / RATE


def check_segments(report: dict[str, Any], text: str) -> None:
    """Every segment once, in order, covering the text; the file holds exactly their audio."""
    segments = report["segments"]
    assert [s["index"] for s in segments] == list(range(len(segments)))
    assert segments[0]["char_start"] == 0 and segments[-1]["char_end"] >= len(
        text.rstrip()
    )
    assert all(
        a["char_end"] <= b["char_start"]
        for a, b in zip(segments, segments[1:], strict=False)
    )
    data_bytes = sum(s["bytes"] for s in segments)
    path = Path(report["output"])
    assert path.stat().st_size == 44 + data_bytes
    assert wav_seconds(path) == pytest.approx(data_bytes / 2 / RATE)
    # The file's length is the sum of the complete metrics (each rounded to 10 ms).
    metrics = sum(s["audio_seconds"] for s in segments)
    assert wav_seconds(path) == pytest.approx(metrics, abs=0.005 * len(segments) + 0.01)


@pytest.fixture(scope="module")
def book(service: Service, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("book") / "book.wav"
    done = veena(
        "say",
        "--file",
        str(ROOT / "tests/cli/book.txt"),
        "-o",
        str(out),
        "--segment-chars",
        "500",
        "--sample-rate",
        str(RATE),
        "--json",
        "--progress",
        key=service.key,
        url=service.url,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "chars" in done.stderr and "s audio" in done.stderr
    )  # the forced progress bar
    return dict(json.loads(done.stdout))


def test_say_a_5000_character_book_matches_its_metrics(book: dict[str, Any]) -> None:
    assert len(BOOK) >= 5000 and book["characters"] == len(BOOK)
    assert len(book["segments"]) >= 10
    check_segments(book, BOOK)
    assert not Path(book["output"] + ".part").exists()
    assert not Path(book["output"] + ".part.json").exists()


def test_transcribe_the_book_back(service: Service, book: dict[str, Any]) -> None:
    done = veena(
        "transcribe",
        book["output"],
        "--format",
        "json",
        key=service.key,
        url=service.url,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    wer = word_error_rate(BOOK, result["text"])
    print(f"book WER {wer:.3f} over {len(result['segments'])} segments")
    assert wer <= 0.15
    starts = [s["start"] for s in result["segments"]]
    assert starts == sorted(starts)
    assert all(
        0 <= s["start"] < s["end"] <= result["duration"] + 0.01
        for s in result["segments"]
    )
    assert all(s["end"] - s["start"] <= 28.01 for s in result["segments"])
    assert result["duration"] == pytest.approx(
        wav_seconds(Path(book["output"])), abs=0.01
    )


RESUME_TEXT = BOOK[
    : BOOK.index("In the spring")
]  # three paragraphs, four segments of ≤ 250


def say_resumable(
    service: Service, out: Path, url: str
) -> subprocess.CompletedProcess[str]:
    return veena(
        "say",
        RESUME_TEXT,
        "-o",
        str(out),
        "--segment-chars",
        "250",
        "--sample-rate",
        str(RATE),
        "--json",
        key=service.key,
        url=url,
    )


@pytest.fixture(scope="module")
def short(service: Service, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uninterrupted run of the resume tests' text."""
    plain = say_resumable(
        service, tmp_path_factory.mktemp("short") / "plain.wav", service.url
    )
    assert plain.returncode == 0, plain.stderr
    return dict(json.loads(plain.stdout))


def test_transcribe_paced_writes_srt(
    service: Service, short: dict[str, Any], tmp_path: Path
) -> None:
    srt = tmp_path / "short.srt"
    done = veena(
        "transcribe",
        short["output"],
        "-o",
        str(srt),
        "--speed",
        "8",
        key=service.key,
        url=service.url,
    )
    assert done.returncode == 0, done.stderr
    cues = srt.read_text().strip().split("\n\n")
    assert len(cues) >= 2
    lines = [cue.splitlines() for cue in cues]
    assert [c[0] for c in lines] == [str(i + 1) for i in range(len(cues))]
    assert all(" --> " in c[1] and c[2] for c in lines)
    text = " ".join(" ".join(c[2:]) for c in lines)
    assert word_error_rate(RESUME_TEXT, text) <= 0.15


def test_a_dropped_connection_resumes_without_duplicated_or_missing_segments(
    service: Service, short: dict[str, Any], tmp_path: Path
) -> None:
    reference = short
    sizes = [s["bytes"] for s in reference["segments"]]
    # Cut the connection in the middle of the third segment.
    proxy = DroppingProxy(service.port, drop_after=sizes[0] + sizes[1] + sizes[2] // 2)
    try:
        cut = say_resumable(
            service, tmp_path / "cut.wav", f"http://127.0.0.1:{proxy.port}"
        )
    finally:
        proxy.close()
    assert cut.returncode == 0, cut.stderr
    assert proxy.dropped and proxy.connections == 2
    report = json.loads(cut.stdout)
    assert report["reconnects"] == 1
    assert (
        "the connection dropped" in cut.stderr
        and "resuming at segment 3/" in cut.stderr
    )
    check_segments(report, RESUME_TEXT)
    assert len(report["segments"]) == len(reference["segments"]) >= 4
    assert [s["attempts"] for s in report["segments"]][2] == 2
    shortest = min(s["audio_seconds"] for s in reference["segments"])
    assert abs(report["audio_seconds"] - reference["audio_seconds"]) < shortest / 2


def test_a_killed_cli_resumes_from_its_state_file(
    service: Service, tmp_path: Path
) -> None:
    out = tmp_path / "killed.wav"
    state = tmp_path / "killed.wav.part.json"
    env = child_env(VEENA_API_KEY=service.key, VEENA_URL=service.url)
    args = [
        VEENA,
        "say",
        RESUME_TEXT,
        "-o",
        str(out),
        "--segment-chars",
        "250",
        "--sample-rate",
        str(RATE),
    ]
    proc = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (state.exists() and json.loads(state.read_text())["done"]):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(json.loads(state.read_text())["done"])
    again = veena(*args[1:], "--json", key=service.key, url=service.url)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["resumed_at"] == done_before >= 1
    check_segments(report, RESUME_TEXT)


def test_expected_failures_are_one_line_with_their_exit_status(
    service: Service, tmp_path: Path
) -> None:
    bad_key = "vk_live_" + "A" * 38
    cases = [
        (
            veena(
                "say",
                "Hello there.",
                "-o",
                str(tmp_path / "a.wav"),
                key=bad_key,
                url=service.url,
            ),
            3,
            "AUTH_FAILED",
        ),
        (
            veena(
                "transcribe",
                str(ROOT / "tests/cli/book.txt"),
                key=service.key,
                url=service.url,
            ),
            6,
            "book.txt",
        ),
        (
            veena(
                "say",
                "Hello there.",
                "--voice",
                "nobody",
                "-o",
                str(tmp_path / "b.wav"),
                key=service.key,
                url=service.url,
            ),
            6,
            "Unknown speaker",
        ),
        (
            veena(
                "say",
                "Hello there.",
                "-o",
                str(tmp_path / "c.wav"),
                key=service.key,
                url=f"http://127.0.0.1:{free_port()}",
            ),
            8,
            "connection refused",
        ),
        (
            veena("say", "Hello there.", "-o", str(tmp_path / "d.wav")),
            3,
            "VEENA_API_KEY",
        ),
    ]
    wav = tmp_path / "hello.wav"
    assert (
        veena(
            "say", "Hello there.", "-o", str(wav), key=service.key, url=service.url
        ).returncode
        == 0
    )
    cases.append(
        (
            veena("transcribe", str(wav), key=bad_key, url=service.url),
            3,
            "invalid_api_key",
        )
    )
    for done, status, words in cases:
        assert done.returncode == status, done.stderr
        assert done.stderr.startswith("veena: error: ") and words in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert service.key not in done.stderr + done.stdout
        assert bad_key not in done.stderr + done.stdout


# Issue 37: results on stdout and progress on stderr whatever is a terminal, and server VAD
# at every upload speed. Two turns of speech with a pause the server's VAD ends a turn at.
TURNS = (
    "The lights of the town came on one by one.",
    "A small boat sailed home across the dark water.",
)


@pytest.fixture(scope="module")
def turns(service: Service, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TURNS spoken one after the other with 1.5 s of silence between them (16 kHz)."""
    folder = tmp_path_factory.mktemp("turns")
    frames = []
    for i, text in enumerate(TURNS):
        part = folder / f"{i}.wav"
        said = veena(
            "say", text, "-o", str(part), "--sample-rate", str(RATE),
            key=service.key, url=service.url,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        with wave.open(str(part)) as w:
            frames.append(w.readframes(w.getnframes()))
    out = folder / "turns.wav"
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames[0] + b"\0\0" * int(1.5 * RATE) + frames[1] + b"\0" * 8000)
    return out


def under_terminals(
    args: list[str], service: Service, *, stdout_file: Path | None = None
) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal, and stdout on another one (or a file).

    Returns the exit status, what reached stdout and what reached stderr.
    """
    env = child_env(VEENA_API_KEY=service.key, VEENA_URL=service.url, COLUMNS="100")
    err_master, err_slave = pty.openpty()
    out_master, out_slave = pty.openpty() if stdout_file is None else (-1, -1)
    with ThreadPoolExecutor(2) as pool:
        err = pool.submit(read_terminal, err_master)
        out = pool.submit(read_terminal, out_master) if out_master >= 0 else None
        with open(stdout_file or os.devnull, "wb") as file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "veena_cli", "transcribe", *args],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=file if stdout_file else out_slave,
                stderr=err_slave,
            )
        for fd in (err_slave, out_slave):
            if fd >= 0:
                os.close(fd)  # the child holds the only copies: EOF when it exits
        status = proc.wait(timeout=300)
        printed = out.result(timeout=10) if out else stdout_file.read_text()  # type: ignore[union-attr]
        return status, printed, err.result(timeout=10)


def read_terminal(fd: int) -> str:
    """Everything written to a pseudo-terminal until its last writer closes it."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child and its copies of the slave are gone
            break
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def assert_turns(text: str) -> None:
    wer = word_error_rate(" ".join(TURNS), text)
    print(f"turns WER {wer:.3f}: {text!r}")
    assert wer <= 0.15


def test_transcribe_to_a_file_while_stderr_is_a_terminal(
    service: Service, turns: Path, tmp_path: Path
) -> None:
    """``veena transcribe talk.wav > talk.txt`` typed in a terminal."""
    out = tmp_path / "talk.txt"
    status, text, err = under_terminals([str(turns)], service, stdout_file=out)
    assert status == 0, err
    assert_turns(text)
    assert text.endswith("\n") and "\x1b" not in text  # lines, no bar
    assert "transcribe [" in err and "items" in err  # the bar stayed on stderr
    assert not any(word in err for word in ("lights", "boat"))


@pytest.mark.parametrize(
    ("vad", "speed", "fmt"),
    [
        ("server", "0", "json"),
        ("server", "1", "text"),
        ("server", "4", "json"),
        ("client", "0", "text"),
    ],
)
def test_transcribe_on_two_terminals_at_every_speed(
    service: Service, turns: Path, vad: str, speed: str, fmt: str
) -> None:
    args = [str(turns), "--vad", vad, "--speed", speed, "--format", fmt]
    status, out, err = under_terminals(args, service)
    assert status == 0, err
    if fmt == "json":
        result = json.loads(out)  # nothing but the result on stdout
        lines = [s["text"] for s in result["segments"]]
    else:
        lines = out.strip().splitlines()
    assert_turns(" ".join(lines))
    if vad == "server":
        assert len(lines) == 2  # the server's turns end at the pause
    assert "\x1b[2K" in err and "transcribe [" in err  # the bar, on stderr
    assert not any(word in err for word in ("lights", "boat"))
