"""Playground routes under ``/playground/`` (namespace ``playground``, ``veena_site.urls``).

The page lists the TTS engine's voices, which ``accounts`` cannot import (it sits below the
apps): the project's URLconf passes them in as ``voices`` (``veena_site.urls``).
"""

from functools import partial

from django.urls import URLPattern, path

from accounts.views import playground
from accounts.views.playground import VoicesSource


def playground_patterns(*, voices: VoicesSource) -> list[URLPattern]:
    """The playground's routes, its page listing ``voices()``."""
    return [
        path("", playground.index, name="index"),
        path("<slug:slug>/", partial(playground.page, voices=voices), name="page"),
        path(
            "<slug:slug>/client-secret/",
            playground.client_secret,
            name="client_secret",
        ),
        path("<slug:slug>/quota/", playground.quota, name="quota"),
    ]
