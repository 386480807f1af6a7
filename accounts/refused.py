"""The record of a request refused after its key was known (issue 30), and a meter's route.

``refuse`` writes it through ``accounts.refusals`` (zero units, the error code and the close
code sent); ``route_of`` names the route a usage or refusal record bills to. Both are shared
by ``UsageMeter`` (a meter never opened that ends ``failed`` leaves a refusal) and the
consumers and views that refuse before any meter exists.
"""

from __future__ import annotations

from accounts.admission import Admission
from accounts.exceptions import DeniedKey
from accounts.models.choices import Route
from accounts.refusals import record_refusal
from accounts.services.usage import default_route
from accounts.usage_tally import MeteredEndpoint


def route_of(endpoint: str, admission: Admission | None) -> str:
    """The route of a meter: REST when admitted over HTTP, else the endpoint's socket.

    A meter with no admission (auth off, tts W7) cannot tell, and says the socket's route
    unless its opener names one (``POST /v1/audio/speech`` names ``speech_rest``).
    """
    if admission is not None and admission.transport == "http":
        return Route.TTS_REST if endpoint == "tts" else Route.ASR_REST
    return default_route(endpoint)


async def refuse(
    who: Admission | DeniedKey | None,
    *,
    endpoint: MeteredEndpoint,
    request_id: str,
    error_code: str,
    close_code: int | None = None,
    route: str | None = None,
    model: str = "",
) -> None:
    """Record a request refused after its key was known (issue 30): zero units, the
    error code and the code sent. Without a key (auth off) nothing is recorded."""
    admission = who if isinstance(who, Admission) else None
    key = who if isinstance(who, DeniedKey) else None
    if admission is not None:
        key = DeniedKey(admission.principal.account_id, admission.principal.key_id)
    if key is None:
        return
    await record_refusal(
        account_id=key.account_id,
        api_key_id=key.key_id,
        endpoint=endpoint,
        route=route or route_of(endpoint, admission),
        error_code=error_code,
        request_id=request_id,
        close_code=close_code,
        model=model,
    )
