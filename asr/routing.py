"""WebSocket route of the realtime ASR app: its path and consumer (``gateway.server.lazy_app``)."""

ROUTE = ("v1/realtime", "asr.consumers:RealtimeConsumer")
