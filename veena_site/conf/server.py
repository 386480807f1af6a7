"""Settings of the server: the production switch, Django's security, TLS, email, logs, serve.

``veena_site/settings.py`` builds Django's structures from them (the secret key file, the
proxy header, ``LOGGING``).
"""

from __future__ import annotations

from pathlib import Path

import environ

from veena_site.conf.registry import Group

BASE_DIR = Path(__file__).resolve().parent.parent.parent

_server = Group(
    __name__,
    "The server: Django, security, TLS, email, logs",
    "See [Deploy](deploy.md).",
)
PRODUCTION = _server.env(
    "PRODUCTION",
    bool,
    False,
    "refuse to start without `SECRET_KEY`; JSON logs, secure cookies, no `?api_key=` by"
    " default (docs/deploy.md, Production)",
)
DATA_DIR = _server.env(
    "DATA_DIR",
    Path,
    BASE_DIR / "var",
    "SQLite file, generated dev secret key, Celery beat schedule, converted models, the"
    " usage journal without `REDIS_URL`. One"
    " embedded server per directory (it holds `DATA_DIR/server.lock`).",
    shown="`var` beside `manage.py`",
)
DEBUG = _server.env("DEBUG", bool, False, "Django debug")
SECRET_KEY = _server.env(
    "SECRET_KEY",
    str,
    "",
    "unset: generated once into `DATA_DIR/secret_key` (mode 0600); required when"
    " `PRODUCTION=true`. Every gateway of a deployment must share it (sessions and"
    " password-reset links are signed with it).",
)
ALLOWED_HOSTS = _server.env(
    "ALLOWED_HOSTS", list, ["127.0.0.1", "localhost", "[::1]"], "comma-separated"
)
# HTTPS behind a proxy (PRODUCTION=true): cookies only over HTTPS, and what the proxy says.
SESSION_COOKIE_SECURE = _server.env(
    "SESSION_COOKIE_SECURE",
    bool,
    PRODUCTION,
    "admin and dashboard session cookie only over HTTPS",
    shown="`PRODUCTION`",
)
CSRF_COOKIE_SECURE = _server.env(
    "CSRF_COOKIE_SECURE",
    bool,
    PRODUCTION,
    "admin and dashboard CSRF cookie only over HTTPS",
    shown="`PRODUCTION`",
)
CSRF_TRUSTED_ORIGINS = _server.env(
    "CSRF_TRUSTED_ORIGINS",
    list,
    [],
    "origins allowed to post the admin's forms (`https://admin.example.com`)",
)


def _proxy_header(value: list[str]) -> tuple[str, str] | None:
    if value and len(value) != 2:
        raise environ.ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must be HEADER,VALUE (e.g. HTTP_X_FORWARDED_PROTO,https)"
        )
    return (value[0], value[1]) if value else None


SECURE_PROXY_SSL_HEADER = _proxy_header(
    _server.env(
        "SECURE_PROXY_SSL_HEADER",
        list,
        [],
        "`HEADER,VALUE` a trusted proxy sets for HTTPS, e.g."
        " `HTTP_X_FORWARDED_PROTO,https`",
    )
)
SECURE_SSL_REDIRECT = _server.env(
    "SECURE_SSL_REDIRECT", bool, False, "redirect plain HTTP to HTTPS"
)
SECURE_HSTS_SECONDS = _server.env(
    "SECURE_HSTS_SECONDS",
    int,
    0,
    "HSTS on HTTPS responses: max-age (0: off; start small, e.g. 300, then 31536000)",
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _server.env(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", bool, False, "HSTS `includeSubDomains`"
)
SECURE_HSTS_PRELOAD = _server.env("SECURE_HSTS_PRELOAD", bool, False, "HSTS `preload`")
TLS_CERT_FILE = _server.env(
    "TLS_CERT_FILE",
    str,
    "",
    "PEM certificate (a full chain is served as the chain); with `TLS_KEY_FILE` the"
    " gateway serves https/wss itself (docs/deploy.md, TLS)",
)
TLS_KEY_FILE = _server.env(
    "TLS_KEY_FILE",
    str,
    "",
    "the certificate's PEM private key; both set: the gateway serves https/wss itself",
)
OPS_TOKEN = _server.env(
    "OPS_TOKEN",
    str,
    "",
    "with `PRODUCTION`: `/metrics` and the detail of `/readyz` answer only"
    " `Authorization: Bearer <OPS_TOKEN>` (unset: nobody); open without `PRODUCTION`",
)
HTTP_HEADER_TIMEOUT_S = _server.env(
    "HTTP_HEADER_TIMEOUT_S",
    float,
    10.0,
    "a connection must send a request's complete headers within this (slowloris and"
    " idle keep-alive connections are dropped; `gateway.server.http_guard`)",
)
# Dashboard (docs/specs/accounts.md §10): password reset by email, quota alerts.
EMAIL_BACKEND = _server.env(
    "EMAIL_BACKEND",
    str,
    "django.core.mail.backends.console.EmailBackend",
    "Django email backend for password resets and quota alerts (default: the console)",
)
EMAIL_HOST = _server.env("EMAIL_HOST", str, "localhost", "SMTP host")
EMAIL_PORT = _server.env("EMAIL_PORT", int, 25, "SMTP port")
EMAIL_HOST_USER = _server.env("EMAIL_HOST_USER", str, "", "SMTP user")
EMAIL_HOST_PASSWORD = _server.env("EMAIL_HOST_PASSWORD", str, "", "SMTP password")
EMAIL_USE_TLS = _server.env("EMAIL_USE_TLS", bool, False, "SMTP with STARTTLS")
DEFAULT_FROM_EMAIL = _server.env(
    "DEFAULT_FROM_EMAIL",
    str,
    "veena@localhost",
    "sender of password resets and quota alerts",
)
LOG_FORMAT = _server.env(
    "LOG_FORMAT",
    str,
    "json" if PRODUCTION else "text",
    "`text` or `json` (one JSON object per line; the default in production)",
    shown="`json` with `PRODUCTION=true`, else `text`",
)
LOG_LEVEL = _server.env("LOG_LEVEL", str, "INFO", "root log level")

_serve = Group(__name__, "`make serve`", "See [Deploy](deploy.md).")
HOST = _serve.env("HOST", str, "127.0.0.1", "where `make serve` listens")
PORT = _serve.env("PORT", int, 8000, "where `make serve` listens")
SERVE_ROLES = _serve.env(
    "SERVE_ROLES",
    list,
    ["gateway", "worker", "celery", "beat"],
    "roles `make serve` starts with `REDIS_URL`",
)
SERVE_WORKERS = _serve.env(
    "SERVE_WORKERS", int, 1, "worker processes `make serve` starts"
)
