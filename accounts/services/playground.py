"""The browser playground's writes: each account's playground key, and tokens for it.

Minting a token writes nothing (the token is a signed value, ``accounts.tokens``); only
the first mint of an account creates its playground key, whose raw key is thrown away,
so no one can use the key itself. Usage of every token lands on that key: the
dashboard's breakdowns show it as "playground". Revoking it (the keys page or the admin)
refuses every token minted so far; the next mint creates a fresh key.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings

from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import KeyKind
from accounts.services.api_keys import api_key_live_or_create
from accounts.tokens import token_sign

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

PLAYGROUND_KEY_NAME = "Playground (browser tokens)"


@dataclass(frozen=True)
class MintedToken:
    """A new token and when it stops admitting connections."""

    token: str = field(repr=False)
    expires_at: datetime
    ttl_seconds: int


def playground_api_key(*, account: Account, actor: User | None) -> ApiKey:
    """The account's live playground key, created (and audited) on first use."""
    return api_key_live_or_create(
        account=account,
        kind=KeyKind.PLAYGROUND,
        name=PLAYGROUND_KEY_NAME,
        actor=actor,
        actor_label="playground",
    )


def playground_token_mint(
    *, account: Account, user: User, origin: str, now: float | None = None
) -> MintedToken:
    """A token for ``user`` on ``account``'s playground key, bound to ``origin``.

    It admits connections for ``PLAYGROUND_TOKEN_TTL_SECONDS``; a stream it opened runs
    on like any other (up to the plan's ``max_session_seconds``).
    """
    api_key = playground_api_key(account=account, actor=user)
    ttl = int(settings.PLAYGROUND_TOKEN_TTL_SECONDS)
    expires = (time.time() if now is None else now) + ttl
    token = token_sign(
        account_id=account.pk,
        key_id=api_key.id,
        user_id=user.pk,
        origin=origin,
        expires_at=expires,
    )
    logger.info(
        "playground token for account %s, user %s (key %s, %d s)",
        account.pk,
        user.pk,
        api_key.id,
        ttl,
    )
    return MintedToken(
        token=token,
        expires_at=datetime.fromtimestamp(int(expires), tz=UTC),
        ttl_seconds=ttl,
    )
