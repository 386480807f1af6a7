"""What a client event, an unusable message or a timer does on a TTS stream: pure steps.

Each function reads the stream's state (``tts.session``) and returns the outputs for
``TtsConsumer.perform`` (docs/specs/tts-ws.md R3, R8, R9, K2, K5, C1–C2, W8, W12, I3, I6, Q8).
"""

from __future__ import annotations

import uuid

from django.conf import settings

from gateway import jsontext
from gateway.link.budget import ControlBudget
from gateway.wording import count
from tts.events import Error, Pong, ServerWarning, rate_limit_message
from tts.outputs import (
    Arm,
    ClearInput,
    Finish,
    Input,
    InputTimer,
    Out,
    Send,
    SentTimer,
    Start,
    TtsFail,
    refusal,
)
from tts.protocol import (
    Cancel,
    Clear,
    ClientEvent,
    End,
    Flush,
    Ping,
    TextInput,
    TtsProtocolError,
    TtsRequest,
    parse_client_event,
)
from tts.session import TtsSession

CONTROL_EVENTS = (Ping, Cancel, Clear, Flush, End)


def idle_timeout_s() -> float:
    """K5's idle limit between keep-alive requests (accounts §12 WS_IDLE_TIMEOUT_SECONDS)."""
    return float(settings.WS_IDLE_TIMEOUT_SECONDS)


def message(
    session: TtsSession, control: ControlBudget, text: str | None, data: bytes | None
) -> list[Out]:
    """One client message, parsed once (``tts.protocol``): the size cap (W11, 1009), the
    idle timers it restarts (K5, I6), then its event or what an unusable one does."""
    event: ClientEvent | TtsProtocolError
    try:
        event = parse_client_event(text, data, limit=settings.TTS_MAX_MESSAGE_BYTES)
    except jsontext.TooLarge:
        return [TtsFail("VALIDATION_ERROR", "Message too large", close_code=1009)]
    except TtsProtocolError as exc:
        event = exc
    outs: list[Out] = []
    if session.incremental:
        outs.append(Arm("input", settings.TTS_INPUT_IDLE_S))
    elif not session.busy and session.requests_started:
        outs.append(Arm("idle", idle_timeout_s()))
    if isinstance(event, TtsProtocolError):
        return outs + bad_message(session, event)
    return outs + client_event(session, event, control)


def client_event(
    session: TtsSession, event: ClientEvent, control: ControlBudget
) -> list[Out]:
    """Apply one parsed client event; control events are rate-limited (issue 9)."""
    if isinstance(event, CONTROL_EVENTS) and not control.take():
        retry = control.retry_after_ms()
        message = rate_limit_message(retry)
        return [
            TtsFail("RATE_LIMIT_EXCEEDED", message, retry_after_ms=retry, fatal=True)
        ]
    busy, incremental = session.busy, session.incremental
    active_id = session.current_request_id() if busy else None
    match event:
        case Ping():
            return [Send(Pong())]
        case Cancel(request_id=rid) if busy and rid in (None, active_id):
            return [Finish(cancelled=True)]
        case Clear() if incremental:
            return [ClearInput()]
        case Clear() if busy:
            return [Finish(cancelled=True)]
        case Cancel(request_id=rid):
            return [Send(ServerWarning("NOT_ACTIVE", "No such active request", rid))]
        case Clear():
            return [Send(ServerWarning("NOT_ACTIVE", "No active request"))]
        case TtsRequest() if busy:
            return [second_request(event.request_id)]
        case TtsRequest():
            return [Start(event)]
        case TextInput() | Flush() | End() if incremental:
            return [Input(event)]
        case _:
            message = "No incremental request is active"
            return [Send(ServerWarning("IGNORED_MESSAGE", message))]


def bad_message(session: TtsSession, exc: TtsProtocolError) -> list[Out]:
    """R3/R8/K2: an unusable message fails the stream only when nothing is active."""
    if session.busy and exc.event in ("request", "start"):
        return [second_request(exc.request_id)]
    if session.busy:
        message = "Message ignored while a request is active"
        return [Send(ServerWarning("IGNORED_MESSAGE", message))]
    rid = exc.request_id or session.request_id_for()
    return [refusal(exc, request_id=rid, keep_alive=exc.keep_alive)]


def second_request(request_id: str | None) -> Send:
    """K2: non-fatal, carrying the rejected request's id; the active one goes on."""
    rid = request_id or str(uuid.uuid4())
    return Send(Error("VALIDATION_ERROR", "A request is already active", rid, False))


def timer(session: TtsSession, name: str) -> list[Out]:
    """The consumer's own timers: request (W8), idle (K5), buffer (I3), input (I6),
    sent (Q8) and drain (W12)."""
    if name == "request" and not session.requests_started:
        timeout = settings.TTS_REQUEST_TIMEOUT_S
        return [
            TtsFail("TIMEOUT", f"No request received within {count(timeout, 'second')}")
        ]
    if name == "idle" and not session.busy:
        idle = idle_timeout_s()
        return [
            TtsFail("TIMEOUT", f"No message received within {count(idle, 'second')}")
        ]
    if not session.busy:
        return []
    if name in ("buffer", "input"):
        return [InputTimer(name)]
    if name == "sent":
        return [SentTimer()]
    if name == "drain":
        return [TtsFail("INTERNAL_ERROR", "server shutting down", close_code=1001)]
    return []
