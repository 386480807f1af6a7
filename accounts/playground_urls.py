"""Playground routes under ``/playground/``, namespace ``playground``."""

from django.urls import path

from accounts.views import playground

app_name = "playground"

urlpatterns = [
    path("", playground.index, name="index"),
    path("<slug:slug>/", playground.page, name="page"),
    path("<slug:slug>/token/", playground.token, name="token"),
    path("<slug:slug>/quota/", playground.quota, name="quota"),
]
