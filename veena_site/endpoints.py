"""The Twisted endpoint strings Daphne listens on: plain TCP, or TLS when both
``TLS_CERT_FILE`` and ``TLS_KEY_FILE`` are set (``https://`` and ``wss://`` on the same port).

The files are read and matched here, before the server starts, so a wrong path or a key that
does not belong to the certificate is one clear line instead of a traceback from the reactor.
A certificate file holding a whole chain (``fullchain.pem``) also serves the chain.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


def escape(value: str) -> str:
    """Quote ``\\``, ``:`` and ``=`` for an endpoint string (paths, IPv6 addresses)."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")


@dataclass(frozen=True)
class Listen:
    """Where the gateway listens and how: ``endpoints`` for Daphne, ``url`` for logs."""

    endpoints: list[str]
    url: str


def gateway_listen(host: str, port: int) -> Listen:
    """The endpoint for ``host:port``: ``ssl:`` with the TLS settings, else ``tcp:``."""
    cert, key = settings.TLS_CERT_FILE, settings.TLS_KEY_FILE
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    base = f"port={port}:interface={escape(host)}"
    if not cert and not key:
        return Listen([f"tcp:{base}"], f"http://{where}")
    if not (cert and key):
        raise ImproperlyConfigured(
            "set both TLS_CERT_FILE and TLS_KEY_FILE, or neither"
        )
    chain = check_tls_files(cert, key)
    endpoint = f"ssl:{base}:privateKey={escape(key)}:certKey={escape(cert)}"
    if chain:
        endpoint += f":extraCertChain={escape(cert)}"
    return Listen([endpoint], f"https://{where}")


def checked_listen(host: str, port: int) -> Listen:
    """``gateway_listen`` for a management command: a bad setting is a CommandError."""
    try:
        return gateway_listen(host, port)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from None


def check_tls_files(cert: str, key: str) -> bool:
    """Load the pair as Twisted will; return whether the certificate file is a chain."""
    from OpenSSL import crypto
    from twisted.internet import ssl
    from twisted.internet.error import VerifyError

    pems = {}
    for name, path in (("TLS_CERT_FILE", cert), ("TLS_KEY_FILE", key)):
        try:
            with open(path, "rb") as f:
                pems[name] = f.read()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name} ({path}) cannot be read: {exc.strerror}"
            ) from None
    try:
        ssl.PrivateCertificate.loadPEM(
            pems["TLS_CERT_FILE"] + b"\n" + pems["TLS_KEY_FILE"]
        )
    except (crypto.Error, VerifyError, ValueError):
        raise ImproperlyConfigured(
            "TLS_CERT_FILE and TLS_KEY_FILE must be a PEM certificate and its private key"
        ) from None
    return pems["TLS_CERT_FILE"].count(PEM_CERTIFICATE) > 1
