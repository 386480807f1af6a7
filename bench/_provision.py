"""The benchmarks' own plan and key, so no account limit can stop a run (issue 13).

Every bench that goes through admission calls ``bench_api_key()`` in a migrated database: a plan
named ``bench`` at the model's upper limits (RPM, concurrent streams, session length, no quota,
every endpoint) and a fresh key on an account of that plan. ``python bench/_provision.py`` does the
same in a child's environment (``DJANGO_SETTINGS_MODULE``, ``DATA_DIR``) and prints the raw key as
its last line. ``make bench`` skips files whose names start with ``_``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLAN_NAME = "bench"
ACCOUNT_NAME = "bench"


def bench_plan() -> object:
    """The ``bench`` plan at the model's upper limits (created or raised to them)."""
    from accounts.models.plans import Plan, default_allowed_endpoints

    plan, _ = Plan.objects.update_or_create(
        name=PLAN_NAME,
        defaults={
            "requests_per_minute": 10_000,
            "max_concurrent_streams": 1_000,
            "monthly_tts_characters": None,
            "monthly_asr_seconds": None,
            "max_session_seconds": 7_200,
            "allowed_endpoints": default_allowed_endpoints(),
        },
    )
    return plan


def bench_api_key() -> str:
    """A new raw key on the ``bench`` account, which is on the ``bench`` plan."""
    from accounts.models.accounts import Account
    from accounts.services.accounts import account_get_or_create
    from accounts.services.api_keys import api_key_create

    plan = bench_plan()
    Account.objects.filter(slug=ACCOUNT_NAME).exclude(plan=plan).update(plan=plan)
    account = account_get_or_create(name=ACCOUNT_NAME, plan=plan)  # type: ignore[arg-type]
    _, raw = api_key_create(
        account=account, name="bench", actor=None, actor_label="bench"
    )
    return raw


if __name__ == "__main__":
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    print(bench_api_key())
