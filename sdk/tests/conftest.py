from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskcost_sdk as tc
from taskcost_sdk._internal.config import reset_for_tests

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the fake LLM server lives in the repo's tests/fake_llm
    sys.path.insert(0, str(REPO))

from tests.fake_llm import FakeLLM  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_sdk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts unconfigured, without OTEL_* / TASKCOST_* / ANTHROPIC_* settings from the outer
    environment."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "TASKCOST_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "1")  # our own tests see SDK-internal errors
    reset_for_tests()
    yield
    reset_for_tests()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """A real HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic wire formats."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def instrumented() -> Iterator[None]:
    """The openai and anthropic clients hooked for this test only."""
    assert tc.instrument() == ["anthropic", "openai"]
    try:
        yield
    finally:
        tc.uninstrument()
