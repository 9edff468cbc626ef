"""pytest plugin (loaded automatically through the ``pytest11`` entry point): the ``taskcost_spans`` fixture.

Usage::

    def test_my_agent(taskcost_spans):
        run_my_agent()
        [task] = taskcost_spans.attributes("task ")
        assert task["taskcost.task.outcome"] == "completed"

Spans are kept in memory. Ids and times are deterministic: trace and span ids count up from 1, task and
call ids are ``0000000000000000000000000000000N``, and the clock starts at 2025-01-01T00:00:00Z and
moves 1 ms forward each time the SDK reads it (``taskcost_spans.clock.advance(2.5)`` jumps ahead).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from ._internal import clock as _clock
from ._internal.config import _state, configure, reset_for_tests

__all__ = ["CapturedSpans", "FakeClock", "SequentialIdGenerator", "taskcost_spans"]

FakeClock = _clock.FakeClock


class SequentialIdGenerator(IdGenerator):
    """Trace ids and span ids 1, 2, 3, ... (deterministic, never zero)."""

    def __init__(self) -> None:
        self._traces = itertools.count(1)
        self._spans = itertools.count(1)
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return next(self._spans)

    def generate_trace_id(self) -> int:
        with self._lock:
            return next(self._traces)


class CapturedSpans:
    """The spans the SDK finished while the fixture was active, kept in memory."""

    def __init__(self, deterministic: bool = True) -> None:
        self.clock: FakeClock | None = None
        if deterministic:
            self.clock = FakeClock()
            _clock.use(self.clock, _clock.sequential_ids())
            _state.id_generator = SequentialIdGenerator()
        self._exporter = InMemorySpanExporter()
        configure(span_processor=SimpleSpanProcessor(self._exporter))

    def configure(self, **kwargs: Any) -> None:
        """Re-run taskcost_sdk.configure() with these arguments (e.g. ``infra=``), still capturing in
        memory. Spans captured before are discarded."""
        self._exporter = InMemorySpanExporter()
        configure(span_processor=SimpleSpanProcessor(self._exporter), **kwargs)

    def use_real_clock(self) -> None:
        """Real wall-clock times from now on (e.g. to check a measured time to first token)."""
        _clock.use(None, None)
        self.clock = None

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
    """Configure taskcost_sdk to capture spans in memory, with deterministic ids and clock, for this test;
    reset the SDK afterwards."""
    reset_for_tests()
    try:
        yield CapturedSpans()
    finally:
        reset_for_tests()
        _clock.use(None, None)
        _state.id_generator = None
