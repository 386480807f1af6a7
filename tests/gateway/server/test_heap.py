"""The startup heap is frozen once the gateway's ASGI application is built."""

from __future__ import annotations

import gc
import subprocess
import sys

from gateway.server.heap import freeze_startup_heap


def test_freeze_loads_the_views_and_freezes_what_is_loaded() -> None:
    gc.unfreeze()
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 10_000
        assert "accounts.views.dashboard" in sys.modules
    finally:
        gc.unfreeze()


def test_the_asgi_application_freezes_its_startup_heap() -> None:
    code = (
        "import gc, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'; "
        "import veena_site.asgi; print(gc.get_freeze_count())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip().splitlines()[-1]) > 10_000
