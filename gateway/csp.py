"""The Content-Security-Policy of every HTML page: dashboard, playground, admin (issue 31).

Every script and style is a file served by this gateway (vendored, never a CDN) and no page
has an inline script or event handler, so the policy allows only this origin: an injected
``<script>`` or ``onerror=`` does not run, and nothing can be loaded from or sent to another
host. The playground's sockets (``connect-src 'self'`` covers ws/wss of this origin), its
audio worklet (``script-src``) and its recorded audio (``media-src blob:``) are allowed; no
page may be framed. JSON and audio responses carry no policy: they are not rendered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

DIRECTIVES = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "media-src": "'self' blob:",
    "worker-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
POLICY = "; ".join(f"{name} {value}" for name, value in DIRECTIVES.items())
HEADER = "Content-Security-Policy"


def with_policy(response: HttpResponse) -> HttpResponse:
    """Add the policy to an HTML response that has none yet."""
    if response.get("Content-Type", "").startswith("text/html"):
        response.headers.setdefault(HEADER, POLICY)
    return response


class ContentSecurityPolicyMiddleware:
    """Sets ``Content-Security-Policy`` on HTML responses; sync and async capable."""

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
        return with_policy(self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        return with_policy(await self.get_response(request))
