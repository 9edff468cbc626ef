"""The export pipeline around the user's (or default) span processor: drop known duplicates, count drops.

Export runs on the BatchSpanProcessor's background thread; the calling thread only appends to a bounded
queue. When the queue is full the oldest span is dropped -- counted here, never waited for.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import names as n

__all__ = ["CountingExporter", "Counters", "ExportStats", "GuardProcessor"]


@dataclass(frozen=True)
class ExportStats:
    """Counts since configure(): spans exported, failed to export (after the exporter's own retries),
    dropped because the export queue was full, and third-party LLM spans suppressed because the SDK recorded
    the same provider call itself."""

    exported: int = 0
    failed: int = 0
    dropped: int = 0
    duplicates_suppressed: int = 0


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.exported = self.failed = self.dropped = self.duplicates = 0

    def add(self, field: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + amount)

    def snapshot(self) -> ExportStats:
        with self._lock:
            return ExportStats(self.exported, self.failed, self.dropped, self.duplicates)


class CountingExporter(SpanExporter):
    """Counts what the wrapped exporter sent and what it failed to send (the exporter retries on its own)."""

    def __init__(self, inner: SpanExporter, counters: Counters) -> None:
        self._inner = inner
        self._counters = counters
        self._shutdown_takes_timeout = "timeout_millis" in inspect.signature(inner.shutdown).parameters

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:
            self._counters.add("failed", len(spans))
            raise
        self._counters.add("exported" if result is SpanExportResult.SUCCESS else "failed", len(spans))
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        if self._shutdown_takes_timeout:
            self._inner.shutdown(timeout_millis=timeout_millis)  # type: ignore[call-arg]
        else:
            self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class GuardProcessor(SpanProcessor):
    """Forwards to ``inner``; drops spans marked as duplicates of an SDK-recorded call; counts."""

    def __init__(self, inner: SpanProcessor, counters: Counters) -> None:
        self._inner = inner
        self._counters = counters
        # BatchSpanProcessor keeps a bounded deque; read its fill level to count the drops it makes.
        batch = getattr(inner, "_batch_processor", None)
        self._queue = getattr(batch, "_queue", None)
        self._max_queue = getattr(batch, "_max_queue_size", None)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes
        if attributes and n.CALL_DUPLICATE_OF in attributes:
            self._counters.add("duplicates")
            return
        queue = self._queue
        if queue is not None and self._max_queue is not None and len(queue) >= self._max_queue:
            self._counters.add("dropped")
        self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)
