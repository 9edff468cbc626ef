"""Ending a test's exporter for good (the tests that point the SDK at a collector that is down or slow)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["EXPORT_THREADS", "stop_exporting"]

# The names of the SDK's export threads (OpenTelemetry's batch worker, and the SDK's bounded shutdown): one a test
# leaves running goes on retrying a collector that is gone, and logs after the test run's summary (or into another
# test's output). conftest.py fails a test that leaves one; stop_exporting checks the names are still these.
EXPORT_THREADS = ("OtelBatchSpanRecordProcessor", "taskcost-sdk shutdown")


def stop_exporting(provider: Any) -> None:
    """``tc.shutdown(timeout_millis=...)`` returns on time while the exporter may go on retrying a bad collector in
    the background, and log after the test (after the test run's summary, when it is one of the last). Stop that
    exporter (its retry wait ends at once), then wait until the pipeline's shutdown and export thread have ended."""
    [guard] = provider._active_span_processor._span_processors
    batch = guard._inner
    batch.span_exporter.shutdown()
    for thread in threading.enumerate():
        if thread.name.startswith(EXPORT_THREADS[1]):
            thread.join(30)
    worker = batch._batch_processor._worker_thread
    assert worker.name.startswith(EXPORT_THREADS), f"the export thread is named {worker.name!r} now"
    worker.join(30)
    assert not worker.is_alive(), "the export thread still runs"
