"""The ``veena`` command line: ``veena say`` and ``veena transcribe``.

Expected failures (bad input, refused key, server errors, dropped connections) end with one
``veena: error: …`` line on stderr and the exit status of ``veena_cli.errors``; never a
traceback, and never the key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from veena_cli.audiofile import Container
from veena_cli.connection import Server
from veena_cli.errors import (
    EXIT_CODES,
    EXIT_FAILURE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SERVER,
    CliError,
)
from veena_cli.output import EXTENSIONS, TextFormat, render
from veena_cli.progress import ProgressBar, duration
from veena_cli.segments import DEFAULT_SEGMENT_CHARS

AUDIO_EXTENSIONS: dict[str, Container] = {
    ".wav": "wav",
    ".pcm": "pcm",
    ".raw": "pcm",
    ".ulaw": "mulaw",
    ".mulaw": "mulaw",
    ".ul": "mulaw",
}
MAX_TEXT_BYTES = 64 * 1024 * 1024


def exit_status_help() -> str:
    """The exit statuses, for ``--help``."""
    return "exit status: " + ", ".join(f"{c} {m}" for c, m in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with both subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", help="server base URL (default $VEENA_URL or http://127.0.0.1:8000)"
    )
    common.add_argument("--key", help="API key (default $VEENA_API_KEY)")
    common.add_argument("--cacert", help="extra CA certificate file for https servers")
    bar = common.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="draw the progress bar even when stderr is not a terminal",
    )
    bar.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="never draw the progress bar",
    )
    parser = argparse.ArgumentParser(
        prog="veena",
        description="Command-line client for a veena speech gateway.",
        epilog=exit_status_help(),
    )
    commands = parser.add_subparsers(dest="command", required=True)

    say = commands.add_parser(
        "say",
        parents=[common],
        help="text to an audio file (/v1/tts/ws)",
        epilog="An interrupted run resumes when the same command is run again.",
    )
    say.add_argument(
        "text", nargs="?", help="the text to speak ('-': stdin; or use --file)"
    )
    say.add_argument("--file", "-f", help="read the text from a file ('-': stdin)")
    say.add_argument("--output", "-o", required=True, help="output file")
    say.add_argument(
        "--format",
        choices=["wav", "pcm", "mulaw"],
        help="file format (default from the -o extension, else wav)",
    )
    say.add_argument("--voice", "--speaker", dest="voice", help="voice or alias")
    say.add_argument("--sample-rate", type=int, help="Hz (default: the server's)")
    say.add_argument("--speed", type=float, help="speaking rate, 0.5 to 2.0")
    say.add_argument(
        "--segment-chars",
        type=int,
        default=DEFAULT_SEGMENT_CHARS,
        help="characters per request, the unit of resumption (default %(default)s)",
    )
    say.add_argument(
        "--retries",
        type=int,
        default=5,
        help="reconnects in a row without progress before giving up (default %(default)s)",
    )
    say.add_argument(
        "--json", action="store_true", help="print a JSON report on stdout"
    )

    tr = commands.add_parser(
        "transcribe", parents=[common], help="audio file to text (/v1/realtime)"
    )
    tr.add_argument("input", help="audio file (wav, mp3, flac, ogg, m4a, …)")
    tr.add_argument("--output", "-o", help="write here instead of stdout")
    tr.add_argument(
        "--format",
        choices=["text", "json", "srt"],
        help="output format (default from the -o extension, else text)",
    )
    tr.add_argument(
        "--speed",
        type=float,
        default=0.0,
        help="upload pace in times real time; 1 = live, 0 = as fast as possible (default)",
    )
    tr.add_argument("--language", help="ISO-639-1 language code (default: detect)")
    tr.add_argument("--prompt", help="context words to prime the model")
    tr.add_argument("--model", help="model name (default: the server's)")
    tr.add_argument(
        "--vad",
        choices=["client", "server"],
        default="client",
        help="who cuts the audio into items: the CLI at pauses (default) or server VAD",
    )
    return parser


def read_text(args: argparse.Namespace) -> str:
    """The text of ``veena say``: the argument, a file, or stdin (``-`` as either)."""
    if (args.text is None) == (args.file is None):
        raise CliError("give the text or --file, not both or neither", 2)
    source = "-" if args.text == "-" else args.file
    if source is None:
        return str(args.text)
    try:
        if source == "-":
            return sys.stdin.read(MAX_TEXT_BYTES)
        with open(source, encoding="utf-8") as f:
            return f.read(MAX_TEXT_BYTES)
    except UnicodeDecodeError:
        raise CliError(f"{source} is not UTF-8 text", EXIT_INPUT) from None
    except OSError as exc:
        raise CliError(
            f"cannot read {source}: {exc.strerror or type(exc).__name__}", EXIT_INPUT
        ) from None


async def run_say(args: argparse.Namespace, server: Server) -> int:
    """``veena say``."""
    from veena_cli.say import Say, SayOptions

    out = Path(args.output)
    container = args.format or AUDIO_EXTENSIONS.get(out.suffix.lower(), "wav")
    options = SayOptions(
        container=container,
        speaker=args.voice,
        sample_rate=args.sample_rate,
        speed=args.speed,
        segment_chars=max(1, args.segment_chars),
    )
    progress = ProgressBar("say", enabled=args.progress)
    job = Say(
        server, read_text(args), out, options, retries=args.retries, progress=progress
    )
    try:
        report = await job.run()
    finally:
        progress.close()
    if args.json:
        print(json.dumps(asdict(report), ensure_ascii=False))
    else:
        again = f", {report.reconnects} reconnects" if report.reconnects else ""
        print(
            f"veena: wrote {report.output}: {duration(report.audio_seconds)} of audio "
            f"({report.audio_seconds:.2f} s), {len(report.segments)} segments, "
            f"{report.characters:,} characters in {report.elapsed_seconds:.1f} s{again}",
            file=sys.stderr,
        )
    return EXIT_OK


async def run_transcribe(args: argparse.Namespace, server: Server) -> int:
    """``veena transcribe``."""
    from veena_cli.audio_in import AudioSource
    from veena_cli.transcribe import RATE, Transcribe, TranscribeOptions

    fmt: TextFormat = args.format or (
        EXTENSIONS.get(Path(args.output).suffix.lower(), "text")
        if args.output
        else "text"
    )
    source = AudioSource(Path(args.input), RATE)
    options = TranscribeOptions(
        speed=max(0.0, args.speed),
        language=args.language,
        prompt=args.prompt,
        model=args.model,
        server_vad=args.vad == "server",
    )
    progress = ProgressBar("transcribe", enabled=args.progress)
    live = fmt == "text" and not args.output

    def print_segment(item: Any) -> None:
        progress.above(item.text.strip(), sys.stdout)  # results: stdout, always

    job = Transcribe(
        server,
        source,
        options,
        progress=progress,
        on_segment=print_segment if live else None,
    )
    try:
        transcript = await job.run()
    finally:
        progress.close()
    if args.output:
        tmp = Path(args.output + ".tmp")
        tmp.write_text(render(transcript, fmt), encoding="utf-8")
        os.replace(tmp, args.output)
    elif not live:
        sys.stdout.write(render(transcript, fmt))
    return EXIT_SERVER if transcript.failed_items else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Run the command; expected failures become one line and an exit status."""
    args = build_parser().parse_args(argv)
    try:
        server = Server.from_options(args.url, args.key, args.cacert)
        runner = run_say if args.command == "say" else run_transcribe
        return asyncio.run(runner(args, server))
    except CliError as exc:
        print(f"veena: error: {exc.line}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # the local files: output directory missing, disk full, …
        where = f": {exc.filename}" if exc.filename else ""
        print(
            f"veena: error: {exc.strerror or type(exc).__name__}{where}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    except KeyboardInterrupt:
        hint = " (run it again to resume)" if args.command == "say" else ""
        print(f"veena: interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
