"""A stand-in gateway process for the cross-process tests (accounts A6, R2, C4, E7, U10, G6).

Run as ``python -m tests.accounts.gateway_child SCENARIO JSON_ARGS`` with the settings taken
from the environment (a PostgreSQL ``DATABASE_URL`` and a ``REDIS_URL`` shared with the
other processes). Each scenario prints JSON lines on stdout; some wait for a line on stdin.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import django

from tests.support.scenarios import run_scenario, say, wait_for_stdin

django.setup()

from channels.db import database_sync_to_async  # noqa: E402

from accounts.admission import Admission, admit  # noqa: E402
from accounts.exceptions import AdmissionDenied  # noqa: E402
from accounts.metering import UsageMeter  # noqa: E402


def scope(raw: str) -> dict[str, Any]:
    return {
        "type": "websocket",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {raw}".encode())],
        "subprotocols": [],
    }


def setup(args: dict[str, Any]) -> None:
    """Create a plan, an account and ``keys`` keys; print their ids and raw keys."""
    import uuid

    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create

    name = f"x-{uuid.uuid4().hex[:8]}"
    plan = Plan.objects.create(
        name=name,
        requests_per_minute=args.get("rpm", 1000),
        max_concurrent_streams=args.get("concurrency", 100),
        monthly_tts_characters=None,
        monthly_asr_seconds=None,
        max_session_seconds=600,
    )
    account = Account.objects.create(name=name, slug=name, plan=plan)
    keys = [
        api_key_create(account=account, name=f"k{i}", actor=None, actor_label="test")
        for i in range(args.get("keys", 1))
    ]
    say(
        account_id=account.pk,
        keys=[{"id": str(k.id), "raw": raw} for k, raw in keys],
    )


async def admit_many(args: dict[str, Any]) -> None:
    """Try ``count`` admissions; hold them (until stdin says so) or release each at once."""
    held: list[Admission] = []
    denied: dict[str, int] = {}
    await wait_for_stdin()  # "go": every process starts together
    for _ in range(args["count"]):
        try:
            admission = await admit(
                scope(args["raw"]), endpoint=args.get("endpoint", "tts")
            )
        except AdmissionDenied as exc:
            denied[exc.reason] = denied.get(exc.reason, 0) + 1
            continue
        if args.get("hold"):
            held.append(admission)
        else:
            await admission.release()
    say(admitted=args["count"] - sum(denied.values()), denied=denied)
    await wait_for_stdin()
    for admission in held:
        await admission.release()
    say(released=len(held))


async def watch(args: dict[str, Any]) -> None:
    """Hold a stream and re-check it every 50 ms, connecting anew each time too (A6, E7)."""
    stream = await admit(scope(args["raw"]), endpoint="asr")
    say(ready=True)
    # "go": the revoker is ready too, so the deadline is the watch's own
    await wait_for_stdin()
    stream_stopped = connect_refused = None
    deadline = time.monotonic() + args.get("seconds", 10)
    while time.monotonic() < deadline and not (stream_stopped and connect_refused):
        if stream_stopped is None and not await stream.still_valid():
            stream_stopped = time.time()
            say(stream_stopped=stream_stopped, reason=stream.stop_reason)
        if connect_refused is None:
            try:
                await (await admit(scope(args["raw"]), endpoint="asr")).release()
            except AdmissionDenied as exc:
                connect_refused = time.time()
                say(connect_refused=connect_refused, reason=exc.reason)
        await asyncio.sleep(0.05)
    await stream.release()
    say(done=True)


async def revoke(args: dict[str, Any]) -> None:
    """Use the key (so this process caches it too), then revoke it on stdin's word."""
    from accounts.models.api_keys import ApiKey
    from accounts.services.api_keys import api_key_revoke

    await (await admit(scope(args["raw"]), endpoint="asr")).release()
    say(ready=True)
    await wait_for_stdin()
    api_key = await ApiKey.objects.aget(pk=args["key_id"])
    started = time.time()
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="cross-process test"
    )
    say(revoke_started=started, revoked=time.time())


async def hold_and_die(args: dict[str, Any]) -> None:
    """Hold a lease and an open, checkpointed record; keep the lease alive until killed."""
    admission = await admit(scope(args["raw"]), endpoint="asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="crash", model="fake"
    )
    await meter.open()
    meter.add(asr_audio_in_ms=1000, asr_items=1, asr_chars_out=11, asr_latency_ms=120)
    await meter.checkpoint()
    meter.add(asr_audio_in_ms=500)  # never checkpointed: lost with the process
    say(ready=True, record_id=str(meter.record_id))
    while True:
        assert await admission.tick() is None
        await asyncio.sleep(0.1)


async def probe(args: dict[str, Any]) -> None:
    """Try to connect every 50 ms; report each change between refused and admitted."""
    last = None
    deadline = time.monotonic() + args.get("seconds", 30)
    while time.monotonic() < deadline:
        try:
            admission = await admit(scope(args["raw"]), endpoint="asr")
        except AdmissionDenied as exc:
            state = exc.reason
        else:
            state = "admitted"
            await admission.release()
        if state != last:
            say(state=state)
            last = state
        if state == "admitted" and args.get("until_admitted"):
            return
        await asyncio.sleep(0.05)


def rollups(args: dict[str, Any]) -> None:
    """G6 on PostgreSQL: random records, recompute twice, compare with a direct GROUP BY."""
    from datetime import timedelta

    from accounts.models.api_keys import ApiKey
    from accounts.models.usage import UsageRecord
    from accounts.services.rollups import usage_rollup
    from tests.accounts.rollup_data import (
        expected_rollups,
        random_records,
        recent_morning,
        stored_rollups,
    )

    keys = list(ApiKey.objects.filter(account_id=args["account_id"]))
    now = recent_morning()
    since = now.replace(minute=0) - timedelta(hours=3)
    records = random_records(keys, since=since, hours=4, count=400)
    UsageRecord.objects.bulk_create(records)
    usage_rollup(granularity="hour", now=now)
    first = stored_rollups("hour", args["account_id"])
    usage_rollup(granularity="hour", now=now)
    second = stored_rollups("hour", args["account_id"])
    expected = expected_rollups(records, "hour", since, since + timedelta(hours=4))
    usage_rollup(granularity="day", now=now)
    day = stored_rollups("day", args["account_id"])
    say(
        rows=len(first),
        idempotent=first == second,
        matches=first == expected,
        day_matches=day
        == expected_rollups(records, "day", since, since + timedelta(hours=4)),
    )


SCENARIOS = {
    "setup": setup,
    "admit_many": admit_many,
    "watch": watch,
    "revoke": revoke,
    "hold_and_die": hold_and_die,
    "probe": probe,
    "rollups": rollups,
}

if __name__ == "__main__":
    run_scenario(SCENARIOS)
