"""pytest plugin (loaded automatically through the ``pytest11`` entry point): the ``taskcost_spans`` fixture.

Usage::

    def test_my_agent(taskcost_spans):
        run_my_agent()
        [task] = taskcost_spans.attributes("task ")
        assert task["taskcost.task.outcome"] == "completed"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ._internal.config import configure, reset_for_tests

__all__ = ["CapturedSpans", "taskcost_spans"]


class CapturedSpans:
    """The spans the SDK finished while the fixture was active, kept in memory."""

    def __init__(self) -> None:
        self._exporter = InMemorySpanExporter()
        configure(span_processor=SimpleSpanProcessor(self._exporter))

    def configure(self, **kwargs: Any) -> None:
        """Re-run taskcost_sdk.configure() with these arguments (e.g. ``infra=``), still capturing in
        memory. Spans captured before are discarded."""
        self._exporter = InMemorySpanExporter()
        configure(span_processor=SimpleSpanProcessor(self._exporter), **kwargs)

    def spans(self, name_prefix: str | None = None) -> list[ReadableSpan]:
        """Finished spans in end order, optionally only those whose name starts with ``name_prefix``."""
        found = self._exporter.get_finished_spans()
        return [s for s in found if name_prefix is None or s.name.startswith(name_prefix)]

    def attributes(self, name_prefix: str | None = None) -> list[dict[str, Any]]:
        """The attributes of each span of :meth:`spans`, as plain dicts."""
        return [dict(s.attributes or {}) for s in self.spans(name_prefix)]

    def resource(self) -> Resource | None:
        """The resource of the finished spans (None before any span finished)."""
        found = self._exporter.get_finished_spans()
        return found[0].resource if found else None

    def clear(self) -> None:
        self._exporter.clear()


@pytest.fixture
def taskcost_spans() -> Iterator[CapturedSpans]:
    """Configure taskcost_sdk to capture spans in memory for this test; reset the SDK afterwards."""
    reset_for_tests()
    captured = CapturedSpans()
    try:
        yield captured
    finally:
        reset_for_tests()
