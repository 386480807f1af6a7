"""Operational endpoints: ``/healthz``, ``/readyz``, ``/metrics``.

With ``PRODUCTION`` the metrics (worker ids, every series) and the detail of ``/readyz``
(database, channel layer, workers, topology) are for operators only: a request must carry
``Authorization: Bearer <OPS_TOKEN>``. Without it ``/metrics`` is 401 and ``/readyz`` says only
``{"ready": …}`` with its status, which is all a load balancer needs (issue 31).
"""

from __future__ import annotations

import hmac
import re
import time

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.link.receiving import receive_until
from gateway.liveness import WorkerStatus, get_liveness
from gateway.metrics import CHANNEL_HOP

PROBE_TIMEOUT_S = 2.0
_BEARER = re.compile(r"bearer[ \t]+(\S+)", re.IGNORECASE)


def operator(request: HttpRequest) -> bool:
    """Whether the request may read operational detail: always outside ``PRODUCTION``,
    else only with the configured ``OPS_TOKEN`` as its bearer token."""
    if not settings.PRODUCTION:
        return True
    match = _BEARER.fullmatch(request.headers.get("Authorization", "").strip())
    token = settings.OPS_TOKEN
    return bool(token and match and hmac.compare_digest(match[1], token))


async def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving HTTP."""
    return JsonResponse({"status": "ok"})


def _database_ok() -> bool:
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # boundary: a probe reports, never raises
        return False
    finally:
        connection.close()


async def _channel_layer_ok() -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        channel = await layer.new_channel("readyz.")
        started = time.monotonic()
        await layer.send(channel, {"type": "readyz.probe"})
        # Not wait_for(receive): a cancelled receive can lose another stream's message.
        if await receive_until(layer, channel, PROBE_TIMEOUT_S) is None:
            return False
        CHANNEL_HOP.observe(time.monotonic() - started)
        return True
    except Exception:  # boundary: a probe reports, never raises
        return False


KINDS = ("tts", "asr")


def _live_workers() -> list[WorkerStatus]:
    try:
        return get_liveness().live_workers()
    except Exception:  # boundary: a probe reports, never raises
        return []


def _engines(statuses: list[WorkerStatus]) -> dict[str, list[str]]:
    """kind → the models loaded by live workers (each named once)."""
    return {
        kind: sorted(
            {s.model_versions[kind] for s in statuses if kind in s.model_versions}
        )
        for kind in KINDS
        if any(s.serves(kind) for s in statuses)
    }


async def readiness() -> dict[str, object]:
    """What ``/readyz`` reports: each dependency, live workers and loaded engines."""
    database = await sync_to_async(_database_ok, thread_sensitive=False)()
    layer = await _channel_layer_ok()
    statuses = await sync_to_async(_live_workers, thread_sensitive=False)()
    workers = {kind: sum(1 for s in statuses if s.serves(kind)) for kind in KINDS}
    kinds = [k for k in settings.GATEWAY_KINDS]
    return {
        "ready": database and layer and all(workers.get(k, 0) > 0 for k in kinds),
        "database": database,
        "channel_layer": layer,
        "workers": workers,
        "engines": _engines(statuses),
        "topology": "distributed" if settings.REDIS_URL else "embedded",
    }


async def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database, the channel layer and a worker for every served kind answer."""
    body = await readiness()
    if not operator(request):  # the detail is the operators' (PRODUCTION: OPS_TOKEN)
        body = {"ready": body["ready"]}
    return JsonResponse(body, status=200 if body["ready"] else 503)


async def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of this process's metrics (operators only)."""
    if not operator(request):
        response = JsonResponse({"error": "an operator token is required"}, status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    body = await sync_to_async(generate_latest, thread_sensitive=False)()
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
