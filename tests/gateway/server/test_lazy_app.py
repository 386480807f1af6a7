"""Consumers of the kinds a gateway does not serve are imported on first use (gateway.server.lazy_app)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from gateway.server.lazy_app import LazyApp, websocket_routes

ROOT = Path(__file__).resolve().parents[3]
TARGET = "tests.gateway.server.lazy_target"
ROUTES = {"echo": ("echo", f"{TARGET}:EchoConsumer")}


@pytest.fixture
def unimported() -> None:
    sys.modules.pop(TARGET, None)


async def _echo(router: URLRouter) -> str:
    comm = WebsocketCommunicator(router, "/echo")
    connected, _ = await comm.connect()
    assert connected
    await comm.send_to(text_data="hi")
    reply = await comm.receive_from(timeout=5)
    await comm.disconnect()
    return str(reply)


@pytest.mark.django_db  # a consumer closes stale database connections on each event
async def test_an_unserved_kind_is_imported_by_its_first_connection(
    unimported: None,
) -> None:
    router = URLRouter(websocket_routes(ROUTES, served=()))
    assert TARGET not in sys.modules
    assert await _echo(router) == "echo hi"
    assert TARGET in sys.modules
    assert await _echo(router) == "echo hi"  # the second connection reuses it


@pytest.mark.django_db
async def test_a_served_kind_is_imported_when_the_routes_are_built(
    unimported: None,
) -> None:
    router = URLRouter(websocket_routes(ROUTES, served=("echo",)))
    assert TARGET in sys.modules
    assert await _echo(router) == "echo hi"


def test_a_target_must_name_a_module_and_a_class() -> None:
    with pytest.raises(ValueError):
        LazyApp(TARGET)
    app = LazyApp(f"{TARGET}:EchoConsumer")
    assert not app.loaded and app.load() is app.load() and app.loaded


# A TTS-only gateway: the application without the realtime consumer or the OpenAI SDK, and
# /v1/realtime still answered by the real consumer (its error for a keyless connection).
TTS_ONLY = """
import asyncio, json, sys
from veena_site.asgi import application
before = {m: m in sys.modules for m in ("asr.consumers", "openai", "tts.consumers")}
from channels.testing import WebsocketCommunicator
async def realtime():
    comm = WebsocketCommunicator(application, "/v1/realtime")
    connected, _ = await comm.connect(timeout=30)
    event = json.loads(await comm.receive_from(timeout=30))
    await comm.disconnect()
    return connected, event["type"], event.get("error", {}).get("code")
reply = asyncio.run(realtime())
print(json.dumps({"before": before, "after": "asr.consumers" in sys.modules,
                  "reply": reply}))
"""


@pytest.mark.parametrize("kinds", ["tts", "tts,asr"])
def test_a_gateway_holds_only_the_consumers_of_its_kinds(
    kinds: str, tmp_path: Path
) -> None:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        GATEWAY_KINDS=kinds,
        DATA_DIR=str(tmp_path),
    )
    env.pop("REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", TTS_ONLY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    serves_asr = "asr" in kinds
    assert result["before"] == {
        "asr.consumers": serves_asr,
        "openai": serves_asr,
        "tts.consumers": True,
    }
    assert result["after"]  # the realtime consumer loaded and answered the connection
    assert result["reply"] == [True, "error", "invalid_api_key"]
