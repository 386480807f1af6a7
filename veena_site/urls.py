"""HTTP routes: operations, admin, and the apps' REST endpoints."""

from django.contrib import admin
from django.urls import path

from accounts.login_throttle import ThrottledAdminAuthenticationForm
from tts import views as tts_views
from veena_site import views

admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
    path("v1/tts", tts_views.synthesize, name="tts-synthesize"),
    path("v1/tts/speakers", tts_views.speakers, name="tts-speakers"),
    path("admin/", admin.site.urls),
]
