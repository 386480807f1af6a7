"""The dialect of a realtime session is fixed once (DI-3), as ``DIALECTS`` allows (issue 33)."""

from __future__ import annotations

import pytest

from asr.protocol import Dialect
from asr.steps import DIALECTS
from gateway.link.states import IllegalTransition


def test_only_an_undetermined_session_selects_a_dialect() -> None:
    moves = {
        (a.name, b.name) for a in Dialect for b in Dialect if DIALECTS.allows(a, b)
    }
    assert moves == {("UNDETERMINED", "OPENAI"), ("UNDETERMINED", "VLLM")}
    with pytest.raises(IllegalTransition):
        DIALECTS.move(Dialect.OPENAI, Dialect.VLLM)
