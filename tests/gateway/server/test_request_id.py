"""One id per HTTP request (H1): the log context, the response header and what a view
reads (its error body, its usage record) are the same id, chosen or given."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from gateway.logs import RequestIdMiddleware, request_id_of, request_id_var


def through_middleware(request: HttpRequest) -> tuple[str, str, HttpResponse]:
    seen: dict[str, str] = {}

    def view(req: HttpRequest) -> HttpResponse:
        seen["view"], seen["log"] = request_id_of(req), request_id_var.get()
        return HttpResponse("ok")

    response = RequestIdMiddleware(view)(request)
    assert isinstance(response, HttpResponse)
    return seen["view"], seen["log"], response


def test_a_request_without_an_id_gets_one_id_everywhere() -> None:
    view, log, response = through_middleware(RequestFactory().get("/v1/models"))
    assert view == log == response["X-Request-Id"]
    assert len(view) == 36
    again, _, _ = through_middleware(RequestFactory().get("/v1/models"))
    assert again != view


def test_a_well_formed_client_id_is_kept_and_a_bad_one_replaced() -> None:
    given = RequestFactory().get("/", HTTP_X_REQUEST_ID="client-42")
    assert through_middleware(given)[0] == "client-42"
    bad = RequestFactory().get("/", HTTP_X_REQUEST_ID="bad id\n")
    view, log, response = through_middleware(bad)
    assert view != "bad id\n" and view == log == response["X-Request-Id"]
