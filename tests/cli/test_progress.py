"""The progress bar keeps to stderr; results written above it go to their own stream."""

from __future__ import annotations

import io

from veena_cli.progress import ProgressBar


def test_a_result_goes_to_its_stream_and_the_bar_is_lifted_and_redrawn() -> None:
    err, out = io.StringIO(), io.StringIO()
    bar = ProgressBar("transcribe", enabled=True, stream=err)
    bar.update(0.5, "1.0/2.0 s sent", force=True)
    drawn = err.getvalue()
    bar.above("Hello there.", out)
    assert out.getvalue() == "Hello there.\n"  # nothing of the bar on stdout
    assert err.getvalue() == drawn + "\r\x1b[2K" + drawn.removeprefix("\r\x1b[2K")
    bar.note("veena: warning: x")
    assert err.getvalue().endswith("\r\x1b[2Kveena: warning: x\n" + bar._line)


def test_without_a_bar_results_are_plain_lines() -> None:
    err, out = io.StringIO(), io.StringIO()
    bar = ProgressBar("transcribe", enabled=False, stream=err)
    bar.update(0.5, "detail", force=True)
    bar.above("Hello.", out)
    assert (out.getvalue(), err.getvalue()) == ("Hello.\n", "")
