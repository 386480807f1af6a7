"""The Celery app: Redis broker when ``REDIS_URL`` is set; eager tasks in the embedded default.

Beat (``celery -A veena_site beat``) runs ``CELERY_BEAT_SCHEDULE`` from settings: the accounts
reaper, lease sweep, rollups, quota reconciliation and purge. Without Redis there is no beat;
the gateway runs the same tasks in-process with ``accounts.scheduler``.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "veena_site.settings")

app = Celery("veena_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
