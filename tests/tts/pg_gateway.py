"""A TTS gateway process on PostgreSQL and Redis for the metering tests (tts U1–U4, accounts E7).

Run as ``python -m tests.tts.pg_gateway SCENARIO JSON_ARGS`` with ``DATABASE_URL`` and
``REDIS_URL`` in the environment. The gateway is the real ASGI application with the worker
embedded on the Redis channel layer and the fake engine. Scenarios print JSON lines on stdout;
``stream`` waits for a line on stdin where its arguments say so, so that the test can look at
the database from its own connection at that moment.
"""

from __future__ import annotations

import json
import time
from typing import Any

import django

from tests.support.scenarios import run_scenario, say, wait_for_stdin

django.setup()

from channels.db import database_sync_to_async  # noqa: E402


def setup(args: dict[str, Any]) -> None:
    """A plan with ``args`` as its values, an account and a key; print their ids."""
    import uuid

    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create

    name = f"tts-{uuid.uuid4().hex[:8]}"
    values = {
        "requests_per_minute": 1000,
        "max_concurrent_streams": 10,
        "monthly_tts_characters": None,
        "monthly_asr_seconds": None,
        "max_session_seconds": 600,
        **args,
    }
    account = Account.objects.create(
        name=name, slug=name, plan=Plan.objects.create(name=name, **values)
    )
    api_key, raw = api_key_create(
        account=account, name="k", actor=None, actor_label="test"
    )
    say(account_id=account.pk, key_id=str(api_key.id), raw=raw)


async def revoke(args: dict[str, Any]) -> None:
    """Revoke the key on stdin's word; print when the revocation committed."""
    from accounts.models.api_keys import ApiKey
    from accounts.services.api_keys import api_key_revoke

    api_key = await ApiKey.objects.aget(pk=args["key_id"])
    say(ready=True)
    await wait_for_stdin()
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="tts metering test"
    )
    say(revoked=time.time())


async def stream(args: dict[str, Any]) -> None:
    """Send ``messages`` on one stream, one request at a time; report what came back.

    ``pause_at_first_frame``: print ``first_frame`` and wait for stdin at the stream's first
    binary frame. ``report_after_frames``: print ``streaming`` after that many frames (a
    revocation may follow). A message's own ``cancel_after_frames`` (not sent) cancels that
    request after that many of its frames.
    """
    from channels.testing import WebsocketCommunicator

    from veena_site.asgi import application
    from veena_site.embedded import start_embedded_worker
    from veena_site.runtime import get_runtime

    worker = start_embedded_worker()
    runtime = get_runtime()
    await runtime.wait_loaded()
    runtime.engines["tts"].engine.chunk_delay_s = args.get("chunk_delay_s", 0.0)
    comm = WebsocketCommunicator(
        application,
        "/v1/tts/ws",
        headers=[(b"authorization", f"Bearer {args['raw']}".encode())],
    )
    assert (await comm.connect())[0]
    events: list[dict[str, Any]] = []
    audio_bytes, frames, close, wav_header_next = 0, 0, None, False
    for message in args["messages"]:
        cancel_after = message.pop("cancel_after_frames", None)
        await comm.send_to(text_data=json.dumps(message))
        request_frames = 0
        while close is None:
            out = await comm.receive_output(timeout=20)
            if out["type"] == "websocket.close":
                close = out.get("code", 1000)
            elif out.get("bytes") is not None:
                frames += 1
                request_frames += 1
                if not wav_header_next:
                    audio_bytes += len(out["bytes"])
                wav_header_next = False
                if frames == 1 and args.get("pause_at_first_frame"):
                    say(first_frame=len(out["bytes"]))
                    await wait_for_stdin()
                if frames == args.get("report_after_frames"):
                    say(streaming=frames)
                if request_frames == cancel_after:
                    await comm.send_to(text_data=json.dumps({"event": "cancel"}))
            else:
                event = json.loads(out["text"])
                if event["event"] == "header":  # E6: the WAV header frame follows
                    wav_header_next = event["format"] == "wav"
                if event["event"] in ("header", "complete", "error"):
                    events.append({**event, "t": time.time()})
                if event["event"] in ("complete", "error"):
                    break
    while close is None:
        out = await comm.receive_output(timeout=10)
        if out["type"] == "websocket.close":
            close = out.get("code", 1000)
    say(result=True, events=events, audio_bytes=audio_bytes, close=close)
    await comm.disconnect()
    await runtime.shutdown()
    worker.cancel()


SCENARIOS = {"setup": setup, "revoke": revoke, "stream": stream}

if __name__ == "__main__":
    run_scenario(SCENARIOS)
