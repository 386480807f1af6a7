"""A gateway process, or an operator's, for the cross-process quota override test.

Run as ``python -m tests.accounts.quota_child SCENARIO JSON_ARGS`` with a PostgreSQL
``DATABASE_URL`` and a ``REDIS_URL`` shared with the other processes. ``spend`` meters TTS
characters through admission as a consumer does; ``operator`` changes the account's quota
through the services, as the admin does. Each reads one JSON command per stdin line and
answers with one JSON line.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import django

from tests.support.scenarios import run_scenario, say, wait_for_stdin

django.setup()

from channels.db import database_sync_to_async  # noqa: E402
from django.utils import timezone  # noqa: E402

from tests.support.quota_use import spend_tts_chars  # noqa: E402


def setup(args: dict[str, Any]) -> None:
    """A plan with a TTS quota, an account on it and one key."""
    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create

    name = f"q-{uuid.uuid4().hex[:8]}"
    plan = Plan.objects.create(
        name=name,
        requests_per_minute=1000,
        max_concurrent_streams=100,
        monthly_tts_characters=args["chars"],
        monthly_asr_seconds=None,
        max_session_seconds=600,
    )
    account = Account.objects.create(name=name, slug=name, plan=plan)
    _, raw = api_key_create(account=account, name="k", actor=None, actor_label="t")
    say(account_id=account.pk, raw=raw)


async def spend(args: dict[str, Any]) -> None:
    """For each ``{"chars": n}`` on stdin: admit, reserve and meter n characters."""
    say(ready=True)
    while line := await wait_for_stdin():
        say(result=await spend_tts_chars(args["raw"], json.loads(line)["chars"]))


def _apply(account_id: int, command: dict[str, Any]) -> int:
    from accounts.models.accounts import Account
    from accounts.models.quota import QuotaOverride
    from accounts.services.quota import period_of
    from accounts.services.quota_overrides import (
        quota_counter_adjust,
        quota_override_create,
        quota_override_end,
    )

    account = Account.objects.get(pk=account_id)
    who = {"actor": None, "actor_label": "operator", "reason": command["reason"]}
    op = command["op"]
    if op == "end":
        override = QuotaOverride.objects.get(pk=command["id"])
        return quota_override_end(override=override, **who).pk
    if op == "adjust":
        period = period_of(timezone.now())
        metric, amount = "tts_characters", command["amount"]
        adjusted = quota_counter_adjust(
            account=account, metric=metric, period=period, amount=amount, **who
        )
        return adjusted.pk
    ends = timezone.now() + timedelta(days=1) if op == "top_up" else None
    return quota_override_create(
        account=account,
        metric="tts_characters",
        kind=op,
        amount=command["amount"],
        ends_at=ends,
        **who,
    ).pk


async def operator(args: dict[str, Any]) -> None:
    """For each command on stdin: create, end or correct, through the services."""
    say(ready=True)
    while line := await wait_for_stdin():
        command = json.loads(line)
        done = await database_sync_to_async(_apply)(args["account_id"], command)
        say(done=done)


if __name__ == "__main__":
    run_scenario({"setup": setup, "spend": spend, "operator": operator})
