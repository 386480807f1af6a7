"""Wiring of the veena gateway; importing it loads the Celery app (Django's convention)."""

from veena_site.celery import app as celery_app

__all__ = ["celery_app"]
