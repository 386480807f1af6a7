"""Celery's command line as the supervisor starts it: ``python -m veena_site.celery_run …``
with Celery's own arguments (``-A veena_site worker …`` or ``… beat …``).

On SIGTERM to the process group each child gets the signal, and the supervisor then
forwards one more to every child still running (``veena_site.supervisor``). Celery beat
ends on SIGTERM by raising ``SystemExit`` from its handler, every time one comes: the
second, arriving while the interpreter shut down, printed a traceback. Once Celery's
main has returned, further SIGTERM and SIGINT are ignored: the process is on its way out.
"""

from __future__ import annotations

import signal


def run() -> None:
    """Celery's main, then termination signals ignored until the process ends."""
    from celery.__main__ import main

    try:
        main()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)


if __name__ == "__main__":
    run()
