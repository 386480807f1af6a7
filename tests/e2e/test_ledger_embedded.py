"""The ledger on the embedded topology with the real engines (issue 30).

A ``rungateway`` child runs Piper and faster-whisper in-process on this run's SQLite
database. A mix of requests on every metered route with known units, plus refusals
(``tests.support.ledger.mix``); immediately after the last one, the records, the quota
counters, the hourly and daily rollups, the CSV, the usage API and the numbers read from
the dashboard page in Chromium all equal what the client was served.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import child_env
from tests.e2e.conftest import gateway_on_test_db, screenshot
from tests.support.ledger import (
    LedgerClient,
    create_ledger_account,
    mix,
    run_async,
    verify,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def engine_gateway(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[tuple[str, dict[str, str]]]:
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=f"sqlite:///{name}"
    )
    with gateway_on_test_db(
        tmp_path_factory,
        django_db_blocker,
        settings_module="tests.e2e.engine_settings",
        wait_path="/readyz",
        GATEWAY_KINDS="tts,asr",
    ) as url:
        yield url, env


@pytest.fixture(scope="module")
def speech() -> tuple[bytes, bytes]:
    """Piper speech at 16 kHz (the file) and 24 kHz (the realtime session)."""
    from tests.asr.conftest import synthesize

    (clip,) = synthesize(["Please read the meter every morning."])
    return clip.bytes_at(16_000), clip.bytes_at(24_000)


def test_ledger_embedded_every_surface_equals_what_was_served(
    engine_gateway: tuple[str, dict[str, str]],
    speech: tuple[bytes, bytes],
    browser_context: Any,
) -> None:
    base, env = engine_gateway
    keys = create_ledger_account(env)
    client = LedgerClient(base, keys["main"])
    seed = random.randrange(10_000)
    speech16k, speech24k = speech
    run_async(
        lambda: mix(
            client,
            tight_key=keys["tight"],
            speech16k=speech16k,
            speech24k=speech24k,
            seed=seed,
        )
    )
    ended = time.monotonic()
    measured = verify(
        base=base, env=env, client=client, context=browser_context, ended=ended
    )
    screenshot(browser_context.pages[-1], "ledger-embedded")
    print(f"\nLEDGER embedded seed {seed}: {measured}; {'; '.join(client.log)}")
