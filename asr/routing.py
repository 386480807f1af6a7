"""WebSocket routes of the realtime ASR app."""

from django.urls import path

from asr.consumers import RealtimeConsumer

websocket_urlpatterns = [path("v1/realtime", RealtimeConsumer.as_asgi())]
