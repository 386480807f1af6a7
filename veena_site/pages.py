"""The site's own pages: the front door at ``/``, the favicon, ``/docs/`` and the OpenAPI
document at ``/v1/openapi.json``."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from veena_site import markdown_pages as mp
from veena_site.openapi import openapi_document
from veena_site.views import operator, readiness

KIND_LABELS = {"tts": "Text to speech", "asr": "Speech to text"}


@require_safe
async def front_door(request: HttpRequest) -> HttpResponse:
    """``/``: what the gateway is, whether its engines are loaded, and where to go next."""
    status = await readiness()
    workers = status["workers"]
    engines = status["engines"]
    assert isinstance(workers, dict) and isinstance(engines, dict)
    kinds = [
        {
            "kind": kind,
            "label": KIND_LABELS[kind],
            "workers": workers.get(kind, 0),
            "engines": engines.get(kind, []),
        }
        for kind in settings.GATEWAY_KINDS
        if kind in KIND_LABELS
    ]
    # With PRODUCTION the dependencies and worker counts are the operators' (/readyz).
    context = {"status": status, "kinds": kinds, "detail": operator(request)}
    return await sync_to_async(render)(request, "veena_site/front_door.html", context)


@require_safe
def favicon(request: HttpRequest) -> FileResponse:
    """``/favicon.ico``, which browsers ask for on every page that names no icon."""
    path = finders.find("veena_site/favicon.ico")
    assert isinstance(path, str)
    response = FileResponse(open(path, "rb"), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


def _pages() -> dict[str, mp.Page]:
    return mp.pages(settings.BASE_DIR)


@require_safe
def docs_index(request: HttpRequest) -> HttpResponse:
    """``/docs/``: every page, by section, with its title."""
    found = _pages()
    sections = [
        (title, [(page, label, mp.render(page, found).title) for page, label in items])
        for title, items in mp.navigation(found)
    ]
    context = {"nav": mp.navigation(found), "sections": sections}
    return render(request, "veena_site/docs_index.html", context)


@require_safe
def docs_page(request: HttpRequest, name: str) -> HttpResponse:
    """``/docs/<name>/``: one Markdown page of the repository, rendered."""
    found = _pages()
    page = found.get(name.rstrip("/"))
    if page is None:
        raise Http404("No such page")
    context = {
        "nav": mp.navigation(found),
        "page": page,
        "rendered": mp.render(page, found),
    }
    return render(request, "veena_site/docs_page.html", context)


@require_safe
def openapi_json(request: HttpRequest) -> JsonResponse:
    """``/v1/openapi.json``: the REST endpoints as OpenAPI 3.1, for this configuration."""
    response = JsonResponse(openapi_document(), json_dumps_params={"indent": 1})
    response["Access-Control-Allow-Origin"] = "*"  # API tools in a browser may read it
    return response
