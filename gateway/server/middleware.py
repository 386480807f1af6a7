"""The base of this project's Django middleware: sync and async capable, so async views (the
REST endpoints, the probes) stay on the event loop, written as a step before the view (which
may answer at once) and a step after it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse


class Middleware:
    """``before(request)`` may answer at once; ``after(request, response)`` the view's."""

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
        answer = self.before(request)
        if answer is not None:
            return answer
        return self.after(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        answer = self.before(request)
        if answer is not None:
            return answer
        return self.after(request, await self.get_response(request))

    def before(self, request: HttpRequest) -> HttpResponse | None:
        """A response that ends the request here, or None to go on to the view."""
        return None

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """The response to send, given the view's."""
        return response
