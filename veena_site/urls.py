"""HTTP routes: operations, admin, and the apps' REST endpoints."""

from django.contrib import admin
from django.urls import path

from veena_site import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
]
