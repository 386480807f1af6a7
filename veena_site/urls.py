"""HTTP routes: the front door and docs, operations, admin, the dashboard, the playground,
and the REST endpoints."""

from django.contrib import admin
from django.urls import include, path

from accounts.login_throttle import ThrottledAdminAuthenticationForm
from accounts.playground_urls import playground_patterns
from accounts.views import usage_api
from tts import client_secrets as tts_client_secrets
from tts import views as tts_views
from tts.speakers import voices_listing
from veena_site import pages, views

admin.site.login_form = ThrottledAdminAuthenticationForm
handler404 = "openai_rest.views.not_found"  # OpenAI's envelope under /v1/

urlpatterns = [
    path("", pages.front_door, name="front-door"),
    path("favicon.ico", pages.favicon, name="favicon"),
    path("docs/", pages.docs_index, name="docs-index"),
    path("docs/<path:name>/", pages.docs_page, name="docs-page"),
    path("v1/openapi.json", pages.openapi_json, name="openapi"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
    path("v1/tts", tts_views.synthesize, name="tts-synthesize"),
    path("v1/tts/speakers", tts_views.speakers, name="tts-speakers"),
    path(
        "v1/tts/client_secrets",
        tts_client_secrets.create,
        name="tts-client-secrets",
    ),
    path("v1/", include("openai_rest.urls")),
    path(
        "v1/organization/usage/audio_speeches",
        usage_api.audio_speeches,
        name="usage-audio-speeches",
    ),
    path(
        "v1/organization/usage/audio_transcriptions",
        usage_api.audio_transcriptions,
        name="usage-audio-transcriptions",
    ),
    path("dashboard/", include("accounts.urls")),
    path(
        "playground/",
        include((playground_patterns(voices=voices_listing), "playground")),
    ),
    path("admin/", admin.site.urls),
]
