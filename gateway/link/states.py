"""Checked state transitions of the stream state enums (issue 33).

Each lifecycle enum of a stream (``tts.session.StreamState`` and ``RequestState``,
``asr.session.AsrState``, ``gateway.link.jobclient.Phase``) has one ``Transitions`` table next
to it: for every state, the states it may move to. Code changes a state only through the table's
``move``; a move the table does not allow is a bug, logged and raised (the consumer's boundary
then ends the stream with ``internal_error``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Mapping
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

S = TypeVar("S", bound=enum.Enum)


class IllegalTransition(RuntimeError):
    """A state change its enum's table does not allow."""


class Transitions(Generic[S]):
    """The allowed moves of one state enum: every member is a key, terminal ones map to
    nothing (or to themselves, where ending twice is harmless)."""

    def __init__(self, allowed: Mapping[S, Collection[S]]) -> None:
        members = {type(state) for state in allowed}
        assert len(members) == 1, "one enum per table"
        (kind,) = members
        missing = set(kind) - set(allowed)
        assert not missing, f"{kind.__name__} states without a row: {missing}"
        self.kind = kind
        self.allowed = {state: frozenset(to) for state, to in allowed.items()}

    def allows(self, old: S, new: S) -> bool:
        """True when the table lets ``old`` move to ``new``."""
        return new in self.allowed[old]

    def move(self, old: S, new: S) -> S:
        """``new``, after checking that ``old`` may move there; raises ``IllegalTransition``
        (and logs it) otherwise."""
        if not self.allows(old, new):
            logger.error(
                "illegal %s transition: %s -> %s",
                self.kind.__name__,
                old.name,
                new.name,
            )
            raise IllegalTransition(f"{self.kind.__name__}: {old.name} -> {new.name}")
        return new
