"""accounts L2: tts/ and asr/ reach accounts only through admission, metering, exceptions,
and (issue 35) minting, for client secrets."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.support.sources import package_imports

ALLOWED = (
    "accounts.admission",
    "accounts.metering",
    "accounts.exceptions",
    "accounts.minting",
)


def allowed(name: str) -> bool:
    return name.split(".")[0] != "accounts" or any(
        name == a or name.startswith(a + ".") for a in ALLOWED
    )


@pytest.mark.parametrize("app", ["tts", "asr"])
def test_apps_import_only_the_accounts_interface(app: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path, name in package_imports(app)
        if not allowed(name)
    ]
    assert offenders == []
