"""The Celery app: Redis broker when ``REDIS_URL`` is set; eager tasks in the embedded default."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "veena_site.settings")

app = Celery("veena_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
