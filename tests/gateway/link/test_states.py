"""Checked state transitions (issue 33): the helper, and the worker link's ``Phase`` table."""

from __future__ import annotations

import enum
import logging

import pytest

from gateway.link.jobclient import PHASES, Phase
from gateway.link.states import IllegalTransition, Transitions


class Light(enum.Enum):
    RED = enum.auto()
    GREEN = enum.auto()
    OFF = enum.auto()


LIGHTS = Transitions(
    {Light.RED: {Light.GREEN, Light.OFF}, Light.GREEN: {Light.RED}, Light.OFF: ()}
)


def test_an_allowed_move_returns_the_new_state() -> None:
    assert LIGHTS.move(Light.RED, Light.GREEN) is Light.GREEN
    assert LIGHTS.move(Light.GREEN, Light.RED) is Light.RED


def test_an_illegal_move_is_logged_and_raised(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="gateway.link.states"):
        with pytest.raises(IllegalTransition, match="Light: OFF -> RED"):
            LIGHTS.move(Light.OFF, Light.RED)
    assert "illegal Light transition: OFF -> RED" in caplog.text
    with pytest.raises(IllegalTransition):
        LIGHTS.move(Light.GREEN, Light.OFF)


def test_a_table_names_every_state() -> None:
    with pytest.raises(AssertionError, match="without a row"):
        Transitions({Light.RED: {Light.GREEN}, Light.GREEN: ()})


def allowed_moves(table: Transitions[Phase]) -> set[tuple[str, str]]:
    return {
        (old.name, new.name) for old in Phase for new in Phase if table.allows(old, new)
    }


def test_the_link_phases_only_move_forward_and_end_closed() -> None:
    assert allowed_moves(PHASES) == {
        ("IDLE", "SUBMITTING"),
        ("IDLE", "CLOSED"),  # a link closed before it submitted
        ("SUBMITTING", "ACCEPTED"),
        ("SUBMITTING", "CLOSED"),
        ("ACCEPTED", "CLOSED"),
    }
    with pytest.raises(IllegalTransition):
        PHASES.move(Phase.CLOSED, Phase.SUBMITTING)
