"""Structured logging: a request id on every line, JSON output, secrets redacted."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar(
    "request_id", default="-"
)

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


def _request_id_for(request: HttpRequest) -> str:
    given = request.headers.get("X-Request-Id", "")
    valid = re.fullmatch(r"[A-Za-z0-9._:-]{1,64}", given)
    rid = given if valid else str(uuid.uuid4())
    request_id_var.set(rid)
    return rid


class RequestIdMiddleware:
    """Give each HTTP request an id (``X-Request-Id`` if valid) and echo it back.

    Sync and async capable, so async views (REST TTS, probes) stay on the event loop.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self._acall(request)
        rid = _request_id_for(request)
        response: HttpResponse = self.get_response(request)
        response.headers.setdefault("X-Request-Id", rid)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        rid = _request_id_for(request)
        response: HttpResponse = await self.get_response(request)
        response.headers.setdefault("X-Request-Id", rid)
        return response
