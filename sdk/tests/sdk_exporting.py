"""Ending a test's exporter for good (the tests that point the SDK at a collector that is down or slow)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["stop_exporting"]


def stop_exporting(provider: Any) -> None:
    """``tc.shutdown(timeout_millis=...)`` returns on time while the exporter may go on retrying a bad collector in
    the background, and log after the test (after the test run's summary, when it is one of the last). Stop that
    exporter (its retry wait ends at once), then wait until the pipeline's shutdown and export thread have ended."""
    [guard] = provider._active_span_processor._span_processors
    batch = guard._inner
    batch.span_exporter.shutdown()
    for thread in threading.enumerate():
        if thread.name.startswith("taskcost-sdk shutdown"):
            thread.join(30)
    worker = batch._batch_processor._worker_thread
    worker.join(30)
    assert not worker.is_alive(), "the export thread still runs"
