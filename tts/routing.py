"""WebSocket route of the TTS app: its path and consumer (``gateway.server.lazy_app``)."""

ROUTE = ("v1/tts/ws", "tts.consumers:TtsConsumer")
