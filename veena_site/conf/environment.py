"""The environment reader every settings module uses, and the switch they all read."""

from __future__ import annotations

import environ

env = environ.Env()

# Several settings modules take their defaults from it.
PRODUCTION = env.bool("PRODUCTION", default=False)
