"""Where ``veena say`` takes its text: the argument, a file, or stdin as ``-`` either way."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from veena_cli.errors import CliError
from veena_cli.main import build_parser, read_text


def text_of(argv: list[str], monkeypatch: pytest.MonkeyPatch, stdin: str = "") -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return read_text(build_parser().parse_args(["say", *argv, "-o", "out.wav"]))


def test_the_argument_a_file_and_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = tmp_path / "book.txt"
    book.write_text("From a file.", encoding="utf-8")
    assert text_of(["Hello there."], monkeypatch) == "Hello there."
    assert text_of(["--file", str(book)], monkeypatch) == "From a file."
    assert text_of(["--file", "-"], monkeypatch, "Piped in.") == "Piped in."
    assert text_of(["-"], monkeypatch, "Piped in too.") == "Piped in too."


def test_text_and_file_together_or_neither_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for argv in ([], ["Hi.", "--file", "-"]):
        with pytest.raises(CliError):
            text_of(argv, monkeypatch)
