"""URLs for the admin tests, independent of the project's URLconf (plus the dashboard the
admin links to)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("accounts.urls")),
]
