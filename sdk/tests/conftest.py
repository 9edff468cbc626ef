from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from taskcost_sdk._internal.config import reset_for_tests


@pytest.fixture(autouse=True)
def _clean_sdk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts unconfigured, without OTEL_* / TASKCOST_* settings from the outer environment."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "TASKCOST_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "1")  # our own tests see SDK-internal errors
    reset_for_tests()
    yield
    reset_for_tests()
