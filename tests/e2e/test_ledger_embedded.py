"""The ledger on the embedded topology with the real engines (issue 30).

A ``rungateway`` child runs Piper and faster-whisper in-process on this run's SQLite
database. A mix of requests on every metered route with known units, plus refusals
(``tests.support.ledger.mix``); immediately after the last one, the records, the quota
counters, the hourly and daily rollups, the CSV, the usage API and the numbers read from
the dashboard page in Chromium all equal what the client was served.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import child_env
from tests.e2e.conftest import gateway_on_test_db
from tests.support.ledger import ledger_speech, run_ledger

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
    return ledger_speech()


def test_ledger_embedded_every_surface_equals_what_was_served(
    engine_gateway: tuple[str, dict[str, str]],
    speech: tuple[bytes, bytes],
    browser_context: Any,
) -> None:
    base, env = engine_gateway
    run_ledger("embedded", base=base, env=env, context=browser_context, speech=speech)
