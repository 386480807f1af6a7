"""WebSocket routes of the TTS app."""

from django.urls import path

from tts.consumers import TtsConsumer

websocket_urlpatterns = [path("v1/tts/ws", TtsConsumer.as_asgi())]
