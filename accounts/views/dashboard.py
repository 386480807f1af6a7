"""Usage pages, the CSV export, recent requests and the staff view (accounts D1–D8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.forms import DEFAULT_HOUR_RANGE_HOURS, RecordsFilterForm, UsageFilterForm
from accounts.models.accounts import Account
from accounts.selectors import (
    Scope,
    account_keys,
    dashboard_account_for,
    dashboard_accounts_for,
    dashboard_global_scope_for,
    scope_keys,
)
from accounts.selectors.export import export_csv
from accounts.selectors.freshness import AS_OF_HEADER, usage_complete_as_of
from accounts.selectors.quota import quota_bars
from accounts.selectors.records import account_has_usage, records_page, usage_records
from accounts.selectors.usage import usage_report
from accounts.views.filters import (
    filter_choices,
    form_values,
    key_choices,
    query_with_zone,
    usage_filter,
)
from accounts.views.present import (
    chart_data,
    chart_texts,
    figures,
    local_time,
    record_row,
    table_row,
)


@login_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """The account picker, or straight to the only account a member has (D1)."""
    accounts = list(dashboard_accounts_for(user=request.user))
    if len(accounts) == 1 and not request.user.is_staff:
        return redirect("dashboard:usage", slug=accounts[0].slug)
    return render(request, "accounts/dashboard/index.html", {"accounts": accounts})


def _usage_context(
    request: HttpRequest, scope: Scope, account: Account | None
) -> tuple[dict[str, Any], int]:
    form = UsageFilterForm(query_with_zone(request))
    context: dict[str, Any] = {
        "account": account,
        "form": form,
        "scope": scope,
        **filter_choices(),
    }
    keys = account_keys(account=account) if account is not None else []
    context["key_choices"] = key_choices(keys, form)
    valid = form.is_valid()
    context["values"] = form_values(form)
    if account is not None and not account_has_usage(account=account):
        context["first_visit"] = True  # the page explains how to start instead
        context["base_url"] = request.build_absolute_uri("/").rstrip("/")
        # What the account may use is known before its first request (plan, overrides).
        context["quota"] = quota_bars(account=account, now=timezone.now())
        # The quota's times in the zone the page names (issue 30).
        context["flt"] = usage_filter(form, scope=scope) if valid else None
        return context, 200
    if not valid:
        return context, 400
    flt = usage_filter(form, scope=scope)
    now = timezone.now()
    report = usage_report(scope=scope, flt=flt, now=now)
    chart = chart_data(report)
    as_of = usage_complete_as_of(now=now)
    context.update(
        as_of=local_time(as_of, flt.tz) if as_of is not None else None,
        # A rolling range (the default hour view) is named by its length and start.
        since=local_time(flt.since, flt.tz) if flt.since is not None else None,
        rolling_hours=DEFAULT_HOUR_RANGE_HOURS,
        flt=flt,
        report=report,
        cards=figures(report.totals),
        chart=chart,
        chart_texts=chart_texts(chart, flt.width),
        by_key=[table_row(b) for b in report.by_key],
        by_route_model=[table_row(b) for b in report.by_route_model],
        by_account=[table_row(b) for b in report.by_account],
        quota=quota_bars(account=account, now=now) if account is not None else [],
        query=request.GET.urlencode(),
    )
    return context, 200


@login_required
@require_GET
def usage(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/usage/``: cards, charts, breakdowns and quota of one account (D4)."""
    account = dashboard_account_for(user=request.user, slug=slug)
    context, status = _usage_context(request, Scope(account=account), account)
    return render(request, "accounts/dashboard/usage.html", context, status=status)


@login_required
@require_GET
def global_usage(request: HttpRequest) -> HttpResponse:
    """``all/``: the same page summed over every account, for staff (D8)."""
    scope = dashboard_global_scope_for(user=request.user)
    context, status = _usage_context(request, scope, None)
    return render(request, "accounts/dashboard/usage.html", context, status=status)


def _csv_response(
    request: HttpRequest, scope: Scope, name: str
) -> HttpResponse | StreamingHttpResponse:
    form = UsageFilterForm(query_with_zone(request))
    if not form.is_valid():
        return HttpResponse(
            "; ".join(str(m) for errors in form.errors.values() for m in errors),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    flt = usage_filter(form, scope=scope)
    # Streamed: rows are read from the database and written a bucket at a time.
    response = StreamingHttpResponse(
        export_csv(scope=scope, flt=flt, now=timezone.now()),
        content_type="text/csv; charset=utf-8",
    )
    filename = f"{name}-usage-{flt.first:%Y%m%d}-{flt.last:%Y%m%d}-{flt.width}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    as_of = usage_complete_as_of(now=timezone.now())
    if as_of is not None:
        response[AS_OF_HEADER] = as_of.astimezone(flt.tz).isoformat()
    return response


@login_required
@require_GET
def usage_csv(request: HttpRequest, slug: str) -> HttpResponse | StreamingHttpResponse:
    """``<slug>/usage.csv``: exactly the page's buckets, by key, route and model (D7)."""
    account = dashboard_account_for(user=request.user, slug=slug)
    return _csv_response(request, Scope(account=account), account.slug)


@login_required
@require_GET
def global_usage_csv(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """``all/usage.csv``: the staff view's export."""
    scope = dashboard_global_scope_for(user=request.user)
    return _csv_response(request, scope, "all")


@login_required
@require_GET
def requests_view(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/requests/``: the latest records, newest first, 50 a page (D6)."""
    account = dashboard_account_for(user=request.user, slug=slug)
    scope = Scope(account=account)
    form = RecordsFilterForm(query_with_zone(request))
    context: dict[str, Any] = {
        "account": account,
        "form": form,
        "key_choices": key_choices(account_keys(account=account), form),
        **filter_choices(records=True),
    }
    valid = form.is_valid()
    context["values"] = form_values(form)
    if not valid:
        return render(request, "accounts/dashboard/requests.html", context, status=400)
    data = form.cleaned_data
    flt = usage_filter(form, scope=scope)
    since, until = flt.window()
    records = usage_records(
        scope=scope,
        since=since,
        until=until,
        key_ids=[k.id for k in scope_keys(scope=scope, key_ids=data["key"])],
        routes=data["route"],
        models=flt.models,
        statuses=data["status"],
        error_code=data["error_code"],
        request_id=data["request_id"].strip(),
    )
    try:
        page = records_page(records, cursor=data["cursor"] or None)
    except ValueError:
        form.add_error("cursor", "This page link is not valid any more.")
        return render(request, "accounts/dashboard/requests.html", context, status=400)
    query = request.GET.copy()
    query.pop("cursor", None)
    context.update(
        page=page,
        rows=[record_row(r, flt.tz) for r in page.records],
        tz=flt.tz,
        query=query.urlencode(),
    )
    return render(request, "accounts/dashboard/requests.html", context)


@login_required
@require_POST
def recompute(request: HttpRequest) -> HttpResponseRedirect:
    """D8: recompute the last 24 h of rollups (a Celery task; inline without a broker)."""
    dashboard_global_scope_for(user=request.user)
    from accounts.tasks import rollup_usage_range

    now = timezone.now()
    since, until = (now - timedelta(hours=24)).isoformat(), now.isoformat()
    if settings.CELERY_TASK_ALWAYS_EAGER:
        rollup_usage_range(since, until)
    else:
        transaction.on_commit(lambda: rollup_usage_range.delay(since, until))
    return HttpResponseRedirect(reverse("dashboard:all") + "?recomputed=1")
