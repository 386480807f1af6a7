"""Accounts, plans, API keys, client secrets, quota counters, usage records, rollups, alerts and the audit log.

One module per entity, imported from where it is defined (``accounts.models.api_keys``);
``choices`` holds the vocabulary they share. Models are thin (STYLE 37): fields,
constraints, ``Meta``, ``__str__``, small properties and ``clean()``. Every write goes
through ``accounts.services``.

Django registers the app's models by importing this package, so it imports each of them.
"""

from accounts.models import (  # noqa: F401
    accounts,
    alerts,
    api_keys,
    audit,
    client_secrets,
    plans,
    quota,
    rollups,
    usage,
    webhooks,
)
