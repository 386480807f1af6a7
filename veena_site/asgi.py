"""ASGI entry point: ``http``, ``websocket`` and ``channel`` (STYLE 59).

The API sockets are not wrapped in ``AllowedHostsOriginValidator``: it refuses clients that send no
``Origin`` (non-browser SDKs); origins are checked per key by accounts admission instead.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "veena_site.settings")
django_asgi_app = get_asgi_application()  # must precede consumer imports

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from asr.routing import ROUTE as ASR_ROUTE  # noqa: E402
from gateway.server.heap import freeze_startup_heap  # noqa: E402
from gateway.server.lazy_app import websocket_routes  # noqa: E402
from gateway.server.lifecycle import tracked  # noqa: E402
from tts.routing import ROUTE as TTS_ROUTE  # noqa: E402
from veena_site.routing import channel_router  # noqa: E402

# The GATEWAY_KINDS consumers load now, the others on their first connection.
websocket = websocket_routes(
    {"tts": TTS_ROUTE, "asr": ASR_ROUTE}, settings.GATEWAY_KINDS
)
application = ProtocolTypeRouter(
    {
        "http": tracked(django_asgi_app),  # a drain waits for responses on their way
        "websocket": URLRouter(websocket),
        "channel": channel_router,
    }
)

# Last: what is loaded now lives as long as the process (gateway.server.heap).
freeze_startup_heap()
