"""The browser playground's writes: each account's playground key, and client secrets from it.

The first mint of an account creates its playground key, whose raw key is thrown away, so
no one can use the key itself; the page gets client secrets minted from it
(``accounts.services.client_secrets``), bound to the member and to the page's origin. Usage
of every secret lands on that key: the dashboard's breakdowns show it as "playground".
Revoking it (the keys page or the admin) refuses every secret minted so far; the next mint
creates a fresh key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import KeyKind, SecretUse
from accounts.services.api_keys import api_key_live_or_create
from accounts.services.client_secrets import MintedSecret, client_secret_create

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PLAYGROUND_KEY_NAME = "Playground (browser secrets)"


def playground_api_key(*, account: Account, actor: User | None) -> ApiKey:
    """The account's live playground key, created (and audited) on first use."""
    return api_key_live_or_create(
        account=account,
        kind=KeyKind.PLAYGROUND,
        name=PLAYGROUND_KEY_NAME,
        actor=actor,
        actor_label="playground",
    )


def playground_secret_mint(
    *, account: Account, user: User, origin: str, use: SecretUse
) -> MintedSecret:
    """A client secret for ``use`` on ``account``'s playground key, for ``user`` and only
    from ``origin``.

    It opens connections for ``PLAYGROUND_TOKEN_TTL_SECONDS``; a stream it opened runs
    on like any other (up to the plan's ``max_session_seconds``).
    """
    api_key = playground_api_key(account=account, actor=user)
    return client_secret_create(
        api_key_id=api_key.id,
        use=use,
        ttl_seconds=int(settings.PLAYGROUND_TOKEN_TTL_SECONDS),
        origin=origin,
        created_by=user,
    )
