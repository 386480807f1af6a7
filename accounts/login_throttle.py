"""Throttled sign-in (the admin's and the dashboard's): failed attempts per username and
per client address, counted together for both pages (they share Django's users).

After ``ADMIN_LOGIN_MAX_FAILURES`` failed logins for one username, or
``ADMIN_LOGIN_MAX_FAILURES_PER_IP`` from one address, within ``ADMIN_LOGIN_LOCKOUT_S``,
further attempts are refused (even with the right password) until that window has passed.
The counters live in Django's cache: Redis with ``REDIS_URL``, so every gateway shares them;
process memory in the embedded default. The address is ``REMOTE_ADDR``, the proxy's own
address behind a reverse proxy (where the per-username limit still applies).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError

logger = logging.getLogger(__name__)

THROTTLED = "Too many failed login attempts. Try again later."


def _keys(request: Any, username: str) -> list[tuple[str, int]]:
    """The counters an attempt counts against, with their limits."""
    user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    address = str(request.META.get("REMOTE_ADDR", "")) if request else ""
    return [
        (f"admin-login:user:{user}", settings.ADMIN_LOGIN_MAX_FAILURES),
        (f"admin-login:ip:{address}", settings.ADMIN_LOGIN_MAX_FAILURES_PER_IP),
    ]


def login_throttled(request: Any, username: str) -> bool:
    """True when either counter of this attempt has reached its limit."""
    counts = cache.get_many([key for key, _ in _keys(request, username)])
    return any(counts.get(key, 0) >= limit for key, limit in _keys(request, username))


def login_failed(request: Any, username: str) -> None:
    """Count one failed attempt against the username and the address."""
    for key, _ in _keys(request, username):
        cache.add(key, 0, timeout=settings.ADMIN_LOGIN_LOCKOUT_S)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: start again
            cache.set(key, 1, timeout=settings.ADMIN_LOGIN_LOCKOUT_S)


class ThrottledLogin(AuthenticationForm):
    """An authentication form refusing attempts past the failure limits."""

    def clean(self) -> dict[str, Any]:
        username = str(self.data.get("username", ""))
        if login_throttled(self.request, username):
            address = self.request.META.get("REMOTE_ADDR") if self.request else None
            logger.warning("login throttled from %s", address)
            raise ValidationError(THROTTLED, code="throttled")
        try:
            return super().clean()
        except ValidationError:
            login_failed(self.request, username)
            raise


class ThrottledAdminAuthenticationForm(ThrottledLogin, AdminAuthenticationForm):
    """The admin's login form, throttled."""


class ThrottledDashboardAuthenticationForm(ThrottledLogin):
    """The dashboard's sign-in form, throttled."""
