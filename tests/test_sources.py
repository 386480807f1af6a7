"""tests.support.sources: a source parse survives a collection that parses source again."""

from __future__ import annotations

import ast
import gc
import sys
from collections.abc import Iterator

import pytest

from tests.support.sources import ROOT, parse, reachable_modules

BIG = ROOT / "tests" / "docs" / "registry.py"


class ParsesWhenCollected:
    """What a leftover task does when collected: its log line formats a traceback, and
    Python 3.11's traceback module parses source for its carets."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        ast.parse("x = (1 + (2 * (3 - 4)))")


@pytest.fixture
def collections_that_parse() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.set_threshold(10)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.collect()


def arm() -> None:
    for _ in range(200):
        ParsesWhenCollected()


@pytest.mark.usefixtures("collections_that_parse")
def test_parse_survives_a_collection_that_parses_inside_it() -> None:
    raw_failures = 0
    for _ in range(20):
        arm()
        try:
            ast.parse(BIG.read_text())
        except SystemError as e:
            assert "recursion depth mismatch" in str(e)
            raw_failures += 1
        arm()
        tree = parse(BIG)
        assert any(isinstance(n, ast.FunctionDef) for n in tree.body)
    if sys.version_info[:2] == (3, 11):
        # The hazard this guards against is real here (the CI failure of 2026-12-02).
        assert raw_failures > 0


def test_reachable_modules_follow_from_imports() -> None:
    reached = reachable_modules("veena_site.worker", ("veena_site", "tts", "asr"))
    assert {"veena_site.worker", "tts.worker.jobs", "asr.worker.jobs"} <= reached
