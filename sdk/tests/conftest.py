from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskcost_sdk as tc
from taskcost_sdk._internal.config import reset_for_tests

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the fake LLM server lives in the repo's tests/fake_llm
    sys.path.insert(0, str(REPO))

from sdk_exporting import EXPORT_THREADS  # noqa: E402

from tests.fake_llm import FakeLLM  # noqa: E402

EXPORT_THREAD_GRACE_S = 2.0  # a shut-down exporter's thread ends at once; this much allows for a loaded machine


def _export_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive() and t.name.startswith(EXPORT_THREADS)}


@pytest.fixture(autouse=True)
def _clean_sdk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts unconfigured, without OTEL_* / TASKCOST_* / ANTHROPIC_* settings from the outer
    environment; and it leaves no export thread of its own running (a collector that is down, hangs or refuses
    included)."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "TASKCOST_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "1")  # our own tests see SDK-internal errors
    reset_for_tests()
    before = _export_threads()
    yield
    reset_for_tests()
    left = _export_threads() - before
    for thread in left:
        thread.join(EXPORT_THREAD_GRACE_S / len(left))
    running = sorted(t.name for t in left if t.is_alive())
    assert not running, f"export threads left running after the test: {running}"


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
