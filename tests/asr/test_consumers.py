"""The realtime consumer's session states move only as ``ASR_STATES`` allows (issue 33)."""

from __future__ import annotations

import pytest

from asr.consumers import ASR_STATES
from asr.session import AsrState
from gateway.link.states import IllegalTransition


def test_a_session_is_admitted_once_and_ends_closed() -> None:
    moves = {
        (a.name, b.name) for a in AsrState for b in AsrState if ASR_STATES.allows(a, b)
    }
    assert moves == {
        ("ADMITTING", "OPEN"),
        ("ADMITTING", "CLOSED"),  # refused, or closed while admitting
        ("OPEN", "CLOSED"),
        ("CLOSED", "CLOSED"),  # fail closes before its error, the teardown again
    }
    with pytest.raises(IllegalTransition):
        ASR_STATES.move(AsrState.CLOSED, AsrState.OPEN)
    with pytest.raises(IllegalTransition):
        ASR_STATES.move(AsrState.OPEN, AsrState.ADMITTING)
