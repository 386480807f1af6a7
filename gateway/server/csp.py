"""The Content-Security-Policy of every HTML page: dashboard, playground, admin (issue 31).

Every script and style is a file served by this gateway (vendored, never a CDN) and no page
has an inline script or event handler, so the policy allows only this origin: an injected
``<script>`` or ``onerror=`` does not run, and nothing can be loaded from or sent to another
host. The playground's sockets (``connect-src 'self'`` covers ws/wss of this origin), its
audio worklet (``script-src``) and its recorded audio (``media-src blob:``) are allowed; no
page may be framed. JSON and audio responses carry no policy: they are not rendered.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from gateway.server.middleware import Middleware

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


class ContentSecurityPolicyMiddleware(Middleware):
    """Sets ``Content-Security-Policy`` on HTML responses that have none yet."""

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault(HEADER, POLICY)
        return response
