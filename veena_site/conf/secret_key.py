"""The embedded default's SECRET_KEY: generated on first start, kept beside the database."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import environ


def embedded_secret_key(data_dir: Path) -> str:
    """Return the dev secret kept in ``data_dir``, creating it on first start.

    The file is created 0600 in the same call that creates it (no window in which another
    user could read it); a process that loses the race to create it reads the winner's.
    """
    path = data_dir / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the creator may still be writing it
            if key := path.read_text().strip():
                return key
            time.sleep(0.02)
        raise environ.ImproperlyConfigured(f"{path} is empty") from None
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key
