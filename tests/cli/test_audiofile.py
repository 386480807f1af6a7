"""The output file: incremental writes, rollback to the last commit, header sizes fixed at the end."""

from __future__ import annotations

import wave
from pathlib import Path

from veena_cli.audiofile import AudioFile, wav_header


def test_wav_header_matches_the_standard_library(tmp_path: Path) -> None:
    path = tmp_path / "ref.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(b"\x01\x00" * 10)
    assert path.read_bytes()[:44] == wav_header(22050, 20)


def test_rollback_discards_uncommitted_audio_and_finish_fixes_sizes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out.wav"
    f = AudioFile(path, "wav", 16000)
    f.open()
    f.write(b"\x01\x00" * 100)
    f.commit()
    f.write(b"\x02\x00" * 50)  # a segment interrupted mid-way
    f.rollback()
    f.write(b"\x03\x00" * 30)
    f.commit()
    f.finish()
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnframes() == 130
        assert w.readframes(130) == b"\x01\x00" * 100 + b"\x03\x00" * 30


def test_reopen_keeps_the_committed_bytes_only(tmp_path: Path) -> None:
    path = tmp_path / "out.pcm"
    f = AudioFile(path, "pcm", 16000)
    f.open()
    f.write(b"ab" * 10)
    f.commit()
    f.write(b"cd" * 5)
    f.close()  # the process died here
    again = AudioFile(path, "pcm", 16000)
    again.open(resume_bytes=20)
    again.write(b"ef")
    again.commit()
    again.finish()
    assert path.read_bytes() == b"ab" * 10 + b"ef"
