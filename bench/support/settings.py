"""Settings of a benchmark's processes: the real settings, tuning constants overridden.

``DJANGO_SETTINGS_MODULE=bench.support.settings`` with ``SETTINGS_OVERRIDES``, a JSON object
of the constants to change (``veena_site.conf.registry.child_environment`` writes it), e.g.
``{"TTS_PIPER_SPINNING": false}``. Operators' settings are environment variables as usual.
"""

from veena_site.conf.registry import apply_overrides
from veena_site.settings import *  # noqa: F403

apply_overrides(globals())
