"""Dashboard benchmark: page and usage-API latency over 1,000,000 usage records (``make bench``).

Seeds a fresh PostgreSQL database of its own (``BENCH_POSTGRES_URL``, default the local
server's ``test`` database as the maintenance connection) with ``BENCH_RECORDS`` (1,000,000)
usage records over 90 days for 50 keys of one account, loaded with ``COPY``; builds the
hourly and daily rollups with the same service the periodic jobs run; then requests every
dashboard page and usage-API call through Django's test client (the whole view, template
and middleware stack, no network) ``BENCH_ROUNDS`` times each and prints p50 / p95.

Side by side, in the same run: the 7-day and 90-day totals computed straight from the
records (what the dashboard never does), so the table shows what reading rollups buys.
The target is ≤ 300 ms p95 per page. Skipped, with a line saying so, when PostgreSQL does
not answer. The database is dropped at the end.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAINTENANCE_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"
)
RECORDS = int(os.environ.get("BENCH_RECORDS", "1000000"))
KEYS = 50
DAYS = 90
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))
TARGET_MS = 300
PASSWORD = "bench-password-1"
# (route, endpoint, model, share of records)
MIX = (
    ("tts_ws", "tts", "piper/en_US-joe-medium", 0.40),
    ("tts_ws", "tts", "vllm/veena-3b", 0.15),
    ("tts_rest", "tts", "piper/en_US-joe-medium", 0.15),
    ("asr_realtime", "asr", "whisper-tiny.en", 0.30),
)
ERROR_CODES = ("inference_failed", "worker_lost", "quota_exceeded")


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def postgres_answers() -> bool:
    import psycopg

    try:
        psycopg.connect(MAINTENANCE_URL, connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def create_database() -> tuple[str, str]:
    import psycopg

    name = f"veena_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(MAINTENANCE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, MAINTENANCE_URL.rsplit("/", 1)[0] + "/" + name


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(MAINTENANCE_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.support.settings"
    os.environ.setdefault("DATA_DIR", tempfile.mkdtemp(prefix="veena-bench-"))
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["testserver"]
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    from gateway.server.heap import freeze_startup_heap

    freeze_startup_heap()  # as veena_site.asgi does when a gateway starts


def make_account() -> tuple[object, list[object], object]:
    from django.contrib.auth.models import User

    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create

    plan = Plan.objects.create(
        name="bench",
        requests_per_minute=1000,
        max_concurrent_streams=50,
        monthly_tts_characters=500_000_000,
        monthly_asr_seconds=10_000_000,
        max_session_seconds=3600,
    )
    account = Account.objects.create(name="Bench", slug="bench", plan=plan)
    keys = [
        api_key_create(
            account=account, name=f"key-{i:02d}", actor=None, actor_label="bench"
        )[0]
        for i in range(KEYS)
    ]
    member = User.objects.create_user("member", "member@example.com", PASSWORD)
    staff = User.objects.create_user(
        "staff", "staff@example.com", PASSWORD, is_staff=True
    )
    account.members.add(member)
    return account, keys, (member, staff)


COLUMNS = (
    "id", "stream_id", "request_id", "account_id", "api_key_id", "endpoint", "route",
    "model", "status", "error_code", "close_code", "started_at", "ended_at",
    "last_checkpoint_at", "checkpoint_seq", "period", "instance", "tts_chars_in",
    "tts_audio_out_ms", "ttfb_ms", "rtf", "asr_audio_in_ms", "asr_chars_out", "asr_items",
    "asr_latency_ms_sum", "asr_latency_ms_max", "asr_latency_hist", "requests",
)  # fmt: skip


def record_lines(
    account_id: int, key_ids: list[str], now: datetime, count: int, seed: int
):
    """``count`` COPY text lines of random records, started within the last 90 days."""
    from accounts import histogram

    rng = random.Random(seed)
    span_s = DAYS * 86_400
    weights = [m[3] for m in MIX]
    for _ in range(count):
        route, endpoint, model, _share = rng.choices(MIX, weights)[0]
        started = now - timedelta(seconds=rng.random() * span_s)
        roll = rng.random()
        status = (
            "completed" if roll < 0.95 else "cancelled" if roll < 0.97
            else "failed" if roll < 0.99 else "abandoned"
        )  # fmt: skip
        code = rng.choice(ERROR_CODES) if status == "failed" else ""
        seconds = rng.uniform(0.5, 30.0)
        ended = started + timedelta(seconds=seconds)
        tts = endpoint == "tts"
        ttfb = int(rng.lognormvariate(5.3, 0.5)) if tts and status != "failed" else None
        items = 0 if tts else rng.randint(1, 6)
        latencies = [int(rng.lognormvariate(5.8, 0.6)) for _ in range(items)]
        hist = histogram.empty()
        for latency in latencies:
            histogram.observe(hist, latency)
        audio_ms = int(seconds * 1000)
        fields = (
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            f"req_{rng.getrandbits(48):012x}",
            str(account_id),
            rng.choice(key_ids),
            endpoint,
            route,
            model,
            status,
            code,
            "1000",
            started.isoformat(),
            ended.isoformat(),
            ended.isoformat(),
            "1",
            started.strftime("%Y-%m"),
            "bench:1",
            str(rng.randint(20, 2000) if tts else 0),
            str(audio_ms if tts else 0),
            "\\N" if ttfb is None else str(ttfb),
            "0.2" if tts else "\\N",
            str(0 if tts else audio_ms),
            str(0 if tts else rng.randint(10, 800)),
            str(items),
            str(sum(latencies)),
            str(max(latencies, default=0)),
            json.dumps(hist) if items else "[]",
            "1",
        )
        yield "\t".join(fields) + "\n"


def seed_records(url: str, account_id: int, key_ids: list[str], now: datetime) -> float:
    import psycopg

    t0 = time.monotonic()
    chunk = 100_000
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        columns = ", ".join(COLUMNS)
        with cur.copy(f"COPY accounts_usagerecord ({columns}) FROM STDIN") as copy:
            for start in range(0, RECORDS, chunk):
                buffer = io.StringIO()
                buffer.writelines(
                    record_lines(
                        account_id, key_ids, now, min(chunk, RECORDS - start), start
                    )
                )
                copy.write(buffer.getvalue())
        cur.execute(
            "INSERT INTO accounts_quotacounter (account_id, period, metric, used, updated_at) "
            "SELECT account_id, period, 'tts_characters', SUM(tts_chars_in), now() "
            "FROM accounts_usagerecord GROUP BY account_id, period"
        )
        cur.execute("ANALYZE accounts_usagerecord")
    return time.monotonic() - t0


def build_rollups(now: datetime) -> tuple[float, int, int]:
    from django.db import connection

    from accounts.models.rollups import UsageRollup
    from accounts.services.rollups import usage_rollup

    t0 = time.monotonic()
    start = (now - timedelta(days=DAYS + 1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    end = now + timedelta(hours=1)
    moment = start
    while moment < end:  # a week per transaction, as a range task would
        usage_rollup(
            granularity="hour", since=moment, until=min(moment + timedelta(days=7), end)
        )
        moment += timedelta(days=7)
    usage_rollup(granularity="day", since=start, until=end + timedelta(days=1))
    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE accounts_usagerollup")
        cursor.execute("ANALYZE accounts_accountrollup")
    hours = UsageRollup.objects.filter(granularity="hour").count()
    days = UsageRollup.objects.filter(granularity="day").count()
    return time.monotonic() - t0, hours, days


def timed(call: Callable[[], object]) -> tuple[float, float]:
    call()  # warm: first-query plans, template loading
    samples = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), p95(samples)


def page(client, path: str) -> Callable[[], object]:
    def call() -> object:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
        return response

    return call


def raw_totals(account, since: datetime) -> Callable[[], object]:
    """The page's series computed from the records: what the dashboard avoids."""
    from django.db.models import Count, Sum
    from django.db.models.functions import TruncDay

    from accounts.models.usage import UsageRecord

    def call() -> object:
        return list(
            UsageRecord.objects.filter(account=account, started_at__gte=since)
            .annotate(day=TruncDay("started_at"))
            .values("day")
            .annotate(
                n=Count("id"), chars=Sum("tts_chars_in"), audio=Sum("asr_audio_in_ms")
            )
        )

    return call


def end_record(account, keys) -> Callable[[], object]:
    """One record opened, then ended: the ending transaction adds it to its four rollup
    rows (issue 30), which is what keeps every page current without a recompute."""
    from django.utils import timezone

    from accounts.services.usage import (
        NewRecord,
        RecordEnd,
        UsageCounters,
        usage_finish,
        usage_open,
    )

    def call() -> object:
        record = NewRecord(
            id=uuid.uuid4(),
            stream_id=uuid.uuid4(),
            request_id="bench-end",
            account_id=account.id,
            api_key_id=keys[0].id,
            endpoint="tts",
            model="piper/en_US-joe-medium",
            started_at=timezone.now(),
            instance="bench:1",
            route="tts_ws",
        )
        usage_open(record=record, counters=UsageCounters())
        counters = UsageCounters(tts_chars_in=120, tts_audio_out_ms=6_000)
        return usage_finish(
            record_id=record.id, counters=counters, end=RecordEnd("completed")
        )

    return call


def measure(account, keys, users, now: datetime) -> list[tuple[str, float, float, str]]:
    from django.test import Client

    member, staff = users
    client, admin = Client(), Client()
    assert client.login(username="member", password=PASSWORD)
    assert admin.login(username="staff", password=PASSWORD)
    today = now.date()
    week = f"from={today - timedelta(days=6)}&to={today}"
    month = f"from={today - timedelta(days=30)}&to={today}"
    quarter = f"from={today - timedelta(days=DAYS - 1)}&to={today}"
    key = keys[0].id
    t7 = int((now - timedelta(days=7)).replace(hour=0, minute=0, second=0).timestamp())
    t31 = int(
        (now - timedelta(days=31)).replace(hour=0, minute=0, second=0).timestamp()
    )
    api = "/v1/organization/usage"
    from accounts.models.usage import UsageRecord

    request_id = (
        UsageRecord.objects.filter(account=account)
        .values_list("request_id", flat=True)
        .first()
    )
    cases = [
        ("usage, 7 days, UTC (default page)", page(client, f"/dashboard/bench/usage/?{week}&tz=UTC"), "page"),
        ("usage, 7 days, America/New_York", page(client, f"/dashboard/bench/usage/?{week}&tz=America/New_York"), "page"),
        ("usage, 31 days of hours, UTC", page(client, f"/dashboard/bench/usage/?{month}&granularity=hour&tz=UTC"), "page"),
        ("usage, 90 days, UTC", page(client, f"/dashboard/bench/usage/?{quarter}&tz=UTC"), "page"),
        ("usage, 90 days, Asia/Kolkata", page(client, f"/dashboard/bench/usage/?{quarter}&tz=Asia/Kolkata"), "page"),
        ("usage, 90 days, one key", page(client, f"/dashboard/bench/usage/?{quarter}&tz=UTC&key={key}"), "page"),
        ("usage.csv, 7 days, UTC", page(client, f"/dashboard/bench/usage.csv?{week}&tz=UTC"), "page"),
        ("usage.csv, 7 days of hours, UTC", page(client, f"/dashboard/bench/usage.csv?{week}&granularity=hour&tz=UTC"), "page"),
        ("requests, first page", page(client, f"/dashboard/bench/requests/?{week}&tz=UTC"), "page"),
        ("requests, one key, failed", page(client, f"/dashboard/bench/requests/?{quarter}&key={key}&status=failed"), "page"),
        ("requests, search by request id", page(client, f"/dashboard/bench/requests/?request_id={request_id}"), "page"),
        ("keys", page(client, "/dashboard/bench/keys/"), "page"),
        ("all accounts (staff), 7 days", page(admin, f"/dashboard/all/?{week}&tz=UTC"), "page"),
        ("API audio_speeches 1d ×31, by key+model", page(client, f"{api}/audio_speeches?start_time={t31}&bucket_width=1d&limit=31&group_by=api_key_id,model"), "api"),
        ("API audio_transcriptions 1h ×168", page(client, f"{api}/audio_transcriptions?start_time={t7}&bucket_width=1h&limit=168"), "api"),
        ("API audio_speeches 1h ×168, by key", page(client, f"{api}/audio_speeches?start_time={t7}&bucket_width=1h&limit=168&group_by=api_key_id"), "api"),
        ("end one record (its rollups kept current)", end_record(account, keys), "write"),
        ("raw records: 7-day totals by day", raw_totals(account, now - timedelta(days=7)), "baseline"),
        ("raw records: 90-day totals by day", raw_totals(account, now - timedelta(days=DAYS)), "baseline"),
    ]  # fmt: skip
    results = []
    for name, call, kind in cases:
        p50, p_95 = timed(call)
        results.append((name, p50, p_95, kind))
        print(f"  {name:<44} p50 {p50:8.1f} ms   p95 {p_95:8.1f} ms", flush=True)
    return results


def report(results, seeded_s: float, rollup: tuple[float, int, int]) -> None:
    load = os.getloadavg()
    print()
    print(
        f"Dashboard bench: {RECORDS:,} records, {KEYS} keys, {DAYS} days; "
        f"{rollup[1]:,} hourly + {rollup[2]:,} daily rollup rows; {ROUNDS} rounds each"
    )
    print(
        f"seed (COPY) {seeded_s:.1f} s, rollups {rollup[0]:.1f} s; load average "
        f"{load[0]:.1f} on {os.cpu_count()} CPUs (a shared machine reads slower)"
    )
    print(f"{'call':<44} {'p50 ms':>9} {'p95 ms':>9}  target ≤ {TARGET_MS} ms p95")
    for name, p50, p_95, kind in results:
        verdict = "" if kind == "baseline" else ("ok" if p_95 <= TARGET_MS else "MISS")
        print(f"{name:<44} {p50:9.1f} {p_95:9.1f}  {verdict}")
    by_name = {name: p50 for name, p50, _, _ in results}
    print(
        "ratio, 90-day page (UTC) / raw 90-day record scan: "
        f"{by_name['usage, 90 days, UTC'] / by_name['raw records: 90-day totals by day']:.2f}"
    )


def main() -> int:
    if not postgres_answers():
        print(
            f"bench/dashboard.py: skipped, PostgreSQL does not answer at {MAINTENANCE_URL}"
        )
        return 0
    name, url = create_database()
    try:
        setup_django(url)
        from django.utils import timezone

        now = timezone.now()
        account, keys, users = make_account()
        print(f"seeding {RECORDS:,} records into {name} …", flush=True)
        seeded_s = seed_records(url, account.pk, [str(k.id) for k in keys], now)
        print(f"seeded in {seeded_s:.1f} s; building rollups …", flush=True)
        rollup = build_rollups(now)
        print(f"rollups in {rollup[0]:.1f} s; measuring …", flush=True)
        results = measure(account, keys, users, now)
        report(results, seeded_s, rollup)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
