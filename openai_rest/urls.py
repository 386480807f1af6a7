"""Routes of the OpenAI-compatible endpoints (under ``/v1/``)."""

from django.urls import path

from openai_rest import client_secrets, speech, transcriptions, views

urlpatterns = [
    path("audio/speech", speech.speech, name="openai-speech"),
    path(
        "audio/transcriptions",
        transcriptions.transcriptions,
        name="openai-transcriptions",
    ),
    path("audio/voices", views.voices, name="openai-voices"),
    path(
        "realtime/client_secrets",
        client_secrets.realtime_client_secrets,
        name="realtime-client-secrets",
    ),
    path("models", views.models, name="openai-models"),
    path("models/<path:model_id>", views.model, name="openai-model"),
]
