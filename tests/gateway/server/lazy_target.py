"""A consumer for tests/gateway/server/test_lazy_app.py, imported only through a LazyApp."""

from channels.generic.websocket import AsyncWebsocketConsumer


class EchoConsumer(AsyncWebsocketConsumer):
    async def receive(self, text_data=None, bytes_data=None):  # type: ignore[no-untyped-def]
        await self.send(text_data=f"echo {text_data}")
