"""Test settings: the real settings module with fast engines and a throwaway database.

A child process of a test gets changed constants through ``SETTINGS_OVERRIDES``
(``tests.conftest.child_env`` writes it; applied last, below).
"""

import os as _os
import tempfile as _tempfile
from pathlib import Path as _Path

from veena_site.conf.registry import apply_overrides
from veena_site.settings import *  # noqa: F403

TTS_ENGINE = "fake"
ASR_ENGINE = "fake"
# The fake-engine tests' event orders and decode counts were written for a 1 s streaming cadence
# with three words held back; the shorter defaults are tested where they are the subject
# (the ASR_CHUNK_MIN_S and silence tests of tests/asr/worker/test_jobs.py) and measured by bench/asr.py.
ASR_CHUNK_MIN_S = 1.0
ASR_UNFIXED_WORDS = 3
API_KEY_PREFIX = "vk_test_"
# The webhook tests' receivers listen on 127.0.0.1 (test_webhooks checks the refusal).
WEBHOOK_ALLOW_PRIVATE_ADDRESSES = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# A file, not Django's shared-cache in-memory SQLite: in shared-cache mode a table lock held by
# one thread fails another at once ("database table is locked") instead of waiting for the busy
# timeout, and metering writes from worker threads while tests read (seen once in CI).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": _os.path.join(
            _tempfile.gettempdir(), f"veena-test-{_os.getpid()}.sqlite3"
        )
    }

# Each test run its own usage journal (accounts.journal), unless a child process is given
# the DATA_DIR of its test (or the folder, as an override): entries never cross runs.
if "DATA_DIR" not in _os.environ:
    USAGE_JOURNAL_DIR = _Path(_tempfile.gettempdir()) / f"veena-journal-{_os.getpid()}"

apply_overrides(globals())
