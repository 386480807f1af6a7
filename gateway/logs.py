"""Structured logging: a request id on every line, JSON output, secrets redacted."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid

from django.http import HttpRequest, HttpResponse

from gateway.server.middleware import Middleware

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar(
    "request_id", default="-"
)
REQUEST_ID_KEY = "veena.request_id"  # the request's id, in its META
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")  # an id a client may choose (X1, H1)

# api_key=…, Bearer …, X-API-Key values, key-bearing subprotocols and client secrets never
# reach a log line.
_REDACTIONS = (
    (re.compile(r"(api_key=)[^&\s\"']+", re.I), r"\1[REDACTED]"),
    (re.compile(r"(bearer\s+)[^\s\"',]+", re.I), r"\1[REDACTED]"),
    (
        re.compile(r"(x-api-key['\"]?\s*[:=,]\s*b?['\"]?)[^\s\"',]+", re.I),
        r"\1[REDACTED]",
    ),
    (
        re.compile(r"((?:veena-api-key|openai-insecure-api-key)\.)[^\s\"',]+", re.I),
        r"\1[REDACTED]",
    ),
    (re.compile(r"vk_[a-z]+_[A-Za-z0-9]{20,}"), "[REDACTED]"),
    # Client secrets (accounts.client_secrets), wherever they appear.
    (re.compile(r"ek_[A-Za-z0-9]{20,}"), "[REDACTED]"),
)


def redact(text: str) -> str:
    """Return ``text`` with every credential pattern replaced by ``[REDACTED]``."""
    for pattern, repl in _REDACTIONS:
        text = pattern.sub(repl, text)
    return text


class RequestIdFilter(logging.Filter):
    """Attach the current request id (or ``-``) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


class RedactFilter(logging.Filter):
    """Rewrite the formatted message so that no credential survives."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, request id, message, exception."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(payload, ensure_ascii=False)


def new_request_id() -> str:
    """Start a new request context and return its id."""
    rid = str(uuid.uuid4())
    request_id_var.set(rid)
    return rid


def request_id_of(request: HttpRequest) -> str:
    """The request's one id (H1): the client's ``X-Request-Id`` when well formed, else a
    new UUID4, chosen once and kept in the request, so the middleware's log context and
    response header, the view's error body and the usage record all carry the same id."""
    rid = request.META.get(REQUEST_ID_KEY)
    if rid is None:
        given = request.headers.get("X-Request-Id", "")
        rid = given if REQUEST_ID.fullmatch(given) else str(uuid.uuid4())
        request.META[REQUEST_ID_KEY] = rid
    return str(rid)


class RequestIdMiddleware(Middleware):
    """Give each HTTP request an id (``X-Request-Id`` if valid) and echo it back."""

    def before(self, request: HttpRequest) -> None:
        request_id_var.set(request_id_of(request))

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response.headers.setdefault("X-Request-Id", request.META[REQUEST_ID_KEY])
        return response
