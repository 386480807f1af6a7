"""Let Daphne send the close codes and reasons our specs require.

Daphne closes a socket through autobahn's ``sendClose``, which accepts only 1000 and
3000–4999 from applications and raises on 1008, 1009, 1011 and 1013; Daphne also drops the
ASGI close ``reason``. The specs (tts-ws §6, realtime LM-7) need those codes on the wire and
the realtime close reason to be the error code, so after ``accept`` a close is sent as
autobahn's own close frame with the code and a reason truncated to 123 bytes. A close before
``accept`` keeps Daphne's behaviour (an HTTP 403), which our consumers never use (W5, CN-4).
"""

from __future__ import annotations

from typing import Any

REASON_MAX_BYTES = 123


def install() -> None:
    """Patch ``daphne.ws_protocol.WebSocketProtocol.handle_reply`` once per process."""
    from daphne.ws_protocol import WebSocketProtocol

    if getattr(WebSocketProtocol, "_veena_close_codes", False):
        return
    original = WebSocketProtocol.handle_reply

    def handle_reply(self: Any, message: dict[str, Any]) -> None:
        if (
            message.get("type") == "websocket.close"
            and self.state != self.STATE_CONNECTING
        ):
            reason = (message.get("reason") or "").encode()[:REASON_MAX_BYTES] or None
            code = message.get("code") or 1000
            self.sendCloseFrame(code=code, reasonUtf8=reason, isReply=False)
            return
        original(self, message)

    WebSocketProtocol.handle_reply = handle_reply
    WebSocketProtocol._veena_close_codes = True
