"""pytest fixtures for the SDK end-to-end tests (import them into a test module to use them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from taskcost.demo.fake_llm import FakeLLM

__all__ = ["fake_llm", "sdk_env", "sql"]


@pytest.fixture
def sdk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A clean SDK: no OTEL_*/TASKCOST_*/ANTHROPIC_* settings from outside, internal errors raised (this
    project's tests must see SDK bugs), clients hooked for the test and unhooked after it."""
    import taskcost_sdk as tc
    from taskcost_sdk._internal.config import reset_for_tests

    for name in list(os.environ):
        if name.startswith(("OTEL_", "TASKCOST_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "1")
    reset_for_tests()
    tc.instrument()
    try:
        yield
    finally:
        tc.uninstrument()
        reset_for_tests()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def sql(db: Any, query: str) -> list[dict[str, Any]]:
    """Rows of ``taskcost sql --format json`` against the running server's database."""
    from tests.conftest import run_cli

    return list(json.loads(run_cli("sql", "--db", str(db), "--format", "json", query).stdout))
