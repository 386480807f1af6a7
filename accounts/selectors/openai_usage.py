"""The usage API in OpenAI's shape (``GET /v1/organization/usage/audio_*``).

Same parameters and page format as OpenAI's Usage API, so its clients and tooling read
ours: ``start_time`` (required, Unix seconds), ``end_time``, ``bucket_width`` (``1h`` or
``1d``; our finest bucket is the hour, so ``1m`` is refused), ``group_by`` (``api_key_id``,
``model``; ``project_id`` and ``user_id`` are accepted and always null), ``api_key_ids``,
``models``, ``limit`` and ``page`` (the cursor from ``next_page``). A call reads at most
``limit`` buckets (≤ 168 hours or ≤ 31 days), however long the range. Buckets start at
``start_time`` floored to the hour. Complete UTC days come from the daily rollups, the rest
from the hourly ones; records are never read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from django.db.models import BigIntegerField, CharField, F, Sum, Value
from django.db.models.functions import Cast

from accounts import buckets as bk
from accounts.models.choices import Endpoint, Granularity
from accounts.selectors import Scope, scope_keys
from accounts.selectors.sources import rollup_rows, stored_moment

Kind = Literal["audio_speeches", "audio_transcriptions"]
WIDTHS = {"1h": timedelta(hours=1), "1d": timedelta(days=1)}
# bucket_width: (default limit, maximum limit), as OpenAI documents them.
LIMITS = {"1h": (24, 168), "1d": (7, 31)}
GROUPS = ("project_id", "user_id", "api_key_id", "model")
ENDPOINTS: dict[str, str] = {
    "audio_speeches": Endpoint.TTS,
    "audio_transcriptions": Endpoint.ASR,
}


class UsageApiError(Exception):
    """A request the usage API refuses, with OpenAI's error envelope fields."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.status = message, param, status

    def body(self) -> dict[str, object]:
        """``{"error": {...}}`` as OpenAI sends it."""
        kind = "invalid_request_error"
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": None,
            }
        }


@dataclass(frozen=True)
class UsageParams:
    """Validated query parameters."""

    start: datetime
    end: datetime
    width: str
    group_by: tuple[str, ...]
    key_ids: tuple[uuid.UUID, ...]
    models: tuple[str, ...]
    limit: int
    page_start: datetime


def _list(query: Mapping[str, Any], name: str) -> list[str]:
    """A list parameter: repeated, ``name[]`` (openai-python) or comma-separated."""
    getlist = getattr(query, "getlist", None)
    raw = (getlist(name) + getlist(name + "[]")) if getlist else [query.get(name, "")]
    return [part for value in raw for part in str(value).split(",") if part]


def _int(query: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = query.get(name)
    if value in (None, ""):
        if default is None:
            raise UsageApiError(f"Missing required parameter: '{name}'.", param=name)
        return default
    try:
        return int(str(value))
    except ValueError:
        raise UsageApiError(f"'{name}' must be an integer.", param=name) from None


def _moment(seconds: int, name: str) -> datetime:
    if not 0 <= seconds < 32_503_680_000:
        raise UsageApiError(f"'{name}' is out of range.", param=name)
    return datetime.fromtimestamp(seconds, UTC)


def parse_params(query: Mapping[str, Any], *, now: datetime) -> UsageParams:
    """Validate the query string; ``UsageApiError`` names the first bad parameter."""
    width = str(query.get("bucket_width") or "1d")
    if width not in WIDTHS:
        raise UsageApiError(
            "bucket_width must be 1h or 1d (usage is kept per hour).",
            param="bucket_width",
        )
    start = bk.floor_hour(_moment(_int(query, "start_time"), "start_time"))
    end = _moment(_int(query, "end_time", int(now.timestamp()) + 1), "end_time")
    if end <= start:
        raise UsageApiError("end_time must be after start_time.", param="end_time")
    group_by = tuple(dict.fromkeys(_list(query, "group_by")))
    if bad := [g for g in group_by if g not in GROUPS]:
        raise UsageApiError(f"Unsupported group_by: {bad[0]!r}.", param="group_by")
    default_limit, max_limit = LIMITS[width]
    limit = _int(query, "limit", default_limit)
    if not 1 <= limit <= max_limit:
        raise UsageApiError(f"limit must be 1–{max_limit} for {width}.", param="limit")
    try:
        key_ids = tuple(uuid.UUID(k) for k in _list(query, "api_key_ids"))
    except ValueError:
        raise UsageApiError(
            "api_key_ids must be key ids.", param="api_key_ids"
        ) from None
    page_start = start
    if page := query.get("page"):
        try:
            page_start = _moment(int(str(page)), "page")
        except (ValueError, UsageApiError):
            raise UsageApiError(
                "page is not a cursor we issued.", param="page"
            ) from None
        if page_start < start or (page_start - start) % WIDTHS[width]:
            raise UsageApiError("page is not a cursor we issued.", param="page")
    return UsageParams(
        start=start,
        end=end,
        width=width,
        group_by=group_by,
        key_ids=key_ids,
        models=tuple(_list(query, "models")),
        limit=limit,
        page_start=page_start,
    )


def _grouped(
    scope: Scope, params: UsageParams, kind: Kind, since: datetime, until: datetime
) -> Iterator[tuple[Any, ...]]:
    """Rows grouped by bucket start (and the group fields) between two instants, as
    ``(bucket start text, key id text, model, requests, characters, audio ms)`` with
    None for a field not grouped by.

    Whole UTC days come from the daily rows; the hours around them from hourly rows. A
    week of hours by key is thousands of rows: the bucket start and the key id come as
    text, each distinct one parsed once by the caller, and the sums as bigints.
    """
    by_key = "api_key_id" in params.group_by
    by_model = "model" in params.group_by
    fields = [
        "bucket_start",
        *(["api_key_id"] if by_key else []),
        *(["model"] if by_model else []),
    ]
    last_day = bk.floor_hour(until).replace(hour=0)
    # Day buckets that start at UTC midnight hold whole daily rows; the open end of the
    # range (today, so far) comes from the hourly rows.
    if params.width == "1d" and since.hour == 0 and since < last_day:
        spans = [
            (Granularity.DAY, since, last_day),
            (Granularity.HOUR, last_day, until),
        ]
    else:
        spans = [(Granularity.HOUR, since, until)]
    for granularity, lo, hi in spans:
        if lo >= hi:
            continue
        rows = (
            rollup_rows(
                scope=scope,
                since=lo,
                until=hi,
                granularity=granularity,
                key_ids=params.key_ids,
                models=params.models,
                endpoint=ENDPOINTS[kind],
                per_key=by_key,
            )
            .values(*fields)
            .annotate(
                # PostgreSQL sums bigints as numeric; a bigint skips Decimal parsing.
                requests_sum=Cast(Sum("requests"), BigIntegerField()),
                chars=Cast(Sum("tts_chars_in"), BigIntegerField()),
                audio_ms=Cast(Sum("asr_audio_in_ms"), BigIntegerField()),
                start_text=Cast("bucket_start", CharField()),
                key_text=Cast("api_key_id", CharField())
                if by_key
                else Value(None, CharField()),
                model_text=F("model") if by_model else Value(None, CharField()),
            )
            .values_list(
                "start_text",
                "key_text",
                "model_text",
                "requests_sum",
                "chars",
                "audio_ms",
            )
        )
        yield from rows


def _result(
    kind: Kind, key_id: str | None, model: str | None, totals: list[int]
) -> dict[str, object]:
    result: dict[str, object] = {"object": f"organization.usage.{kind}.result"}
    if kind == "audio_speeches":
        result["characters"] = totals[1]
    else:
        result["seconds"] = (totals[2] + 500) // 1000
    result.update(
        num_model_requests=totals[0],
        project_id=None,
        user_id=None,
        api_key_id=key_id,
        model=model,
    )
    return result


def _group_order(
    item: tuple[tuple[str | None, str | None], list[int]],
) -> tuple[str, str]:
    """Results within a bucket in the order of their key id and model as text."""
    key_id, model = item[0]
    return str(key_id), str(model)


def usage_page(*, scope: Scope, kind: Kind, params: UsageParams) -> dict[str, object]:
    """One page of buckets in OpenAI's ``page`` object."""
    scope_keys(scope=scope, key_ids=params.key_ids)  # 403 for another account's key
    step = WIDTHS[params.width]
    starts: list[datetime] = []
    moment = params.page_start
    while moment < params.end and len(starts) < params.limit:
        starts.append(moment)
        moment += step
    has_more = moment < params.end
    if not starts:
        return {"object": "page", "data": [], "has_more": False, "next_page": None}
    until = min(
        starts[-1] + step,
        bk.floor_hour(params.end - timedelta(microseconds=1)) + bk.HOUR,
    )
    # One dict of groups per bucket: the page is built in one pass over the rows.
    index_of = {start: index for index, start in enumerate(starts)}
    indexes: dict[str, int | None] = {}  # bucket start text → bucket index
    key_ids: dict[str | None, str | None] = {None: None}  # key id text → dashed
    totals: list[dict[tuple[str | None, str | None], list[int]]] = [{} for _ in starts]
    for start_text, key_text, model, requests, chars, audio_ms in _grouped(
        scope, params, kind, starts[0], until
    ):
        if start_text in indexes:
            index = indexes[start_text]
        else:
            start = stored_moment(start_text)
            index = index_of.get(start)
            if index is None:
                index = bk.bucket_of(starts, start)
            indexes[start_text] = index
        if index is None:
            continue
        key_id = key_ids.get(key_text)
        if key_id is None and key_text is not None:
            # PostgreSQL sends a key id dashed, SQLite as 32 hex digits.
            key_id = key_ids[key_text] = str(uuid.UUID(key_text))
        group = (key_id, model)
        cell = totals[index].get(group)
        if cell is None:
            cell = totals[index][group] = [0, 0, 0]
        cell[0] += requests or 0
        cell[1] += chars or 0
        cell[2] += audio_ms or 0
    data = []
    for start, groups in zip(starts, totals, strict=True):
        ordered = sorted(groups.items(), key=_group_order)
        data.append(
            {
                "object": "bucket",
                "start_time": int(start.timestamp()),
                "end_time": int((start + step).timestamp()),
                "results": [_result(kind, *g, t) for g, t in ordered],
            }
        )
    return {
        "object": "page",
        "data": data,
        "has_more": has_more,
        "next_page": str(int(moment.timestamp())) if has_more else None,
    }
