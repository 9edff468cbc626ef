"""Engine metrics into the store: the series cap and the batch (``EngineIntake``, shared by the OTLP receivers and the
scraper), and the scraper the server runs itself over the ``engine_scrape`` targets (``EngineScraper``).

The scraper is one thread. Each target is fetched every ``interval_s`` with httpx (a timeout of at most 10 s), its
Prometheus text parsed and mapped (``_engine_metrics``), and the samples submitted to the store like any intake
batch. A target that fails (unreachable, an HTTP error, text that is not Prometheus', a store that refuses) is logged
once when it starts failing and once when it recovers, counted in ``taskcost_engine_scrapes``, and never stops the
other targets or the server.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

from taskcost.collector._engine_metrics import TABLE, Parsed, SeriesLimit, engine_rows, samples_from_text
from taskcost.collector._metrics import Metrics
from taskcost.settings import EngineTarget, Settings
from taskcost.store import CommitInfo, PreparedBatch, Store

__all__ = ["EngineIntake", "EngineScraper", "metrics_export_response"]

log = logging.getLogger("taskcost.collector")
_MAX_TIMEOUT_S = 10.0
_COMMIT_WAIT_S = 30.0


class EngineIntake:
    """Parsed samples -> a batch for the store, within the project's series cap, counted in ``metrics``."""

    def __init__(self, max_series: int, metrics: Metrics | None = None) -> None:
        self.limit = SeriesLimit(max_series)
        self.metrics = metrics

    @classmethod
    def of(cls, metrics: Metrics | None, settings: Settings) -> EngineIntake:
        """The intake the receivers of one app share (one series cap), kept on its ``metrics``."""
        if metrics is None:
            return cls(settings.engine_max_series)
        if not isinstance(metrics.engine_series, EngineIntake):
            metrics.engine_series = cls(settings.engine_max_series, metrics)
        intake: EngineIntake = metrics.engine_series
        return intake

    def _count(self, outcome: str, n: int) -> None:
        if self.metrics is not None and n:
            self.metrics.engine_samples.labels(outcome).inc(n)

    def batch(self, parsed: Parsed, *, project: str, source: str) -> tuple[PreparedBatch | None, int]:
        """The samples the cap admits as a batch (None: none), and how many the cap dropped."""
        kept, over = self.limit.admit(project, parsed.samples)
        self._count("rejected", parsed.rejected)
        self._count("ignored", parsed.ignored)
        self._count("over_series_cap", over)
        if over:
            log.warning(
                "project %s: %d engine metric sample(s) dropped: over its %d series (engine_max_series)",
                project,
                over,
                self.limit.max_series,
            )
        if not kept:
            return None, over
        columns = engine_rows(kept, project=project, source=source, received_ns=time.time_ns())
        return PreparedBatch(columns={TABLE: columns}, span_count=0, sample_count=len(kept)), over

    def stored(self, batch: PreparedBatch) -> None:
        self._count("stored", batch.sample_count)


def metrics_export_response(parsed: Parsed) -> ExportMetricsServiceResponse:
    """An OTLP metrics export's success, with ``partial_success`` set only when data points were rejected (the spec's
    rule: their count, and why, the first few)."""
    msg = ExportMetricsServiceResponse()
    if parsed.rejected:
        msg.partial_success.rejected_data_points = parsed.rejected
        msg.partial_success.error_message = "; ".join(parsed.messages)
    return msg


class EngineScraper:
    """Scrapes ``targets`` in one thread until ``stop``."""

    def __init__(self, store: Store, targets: list[EngineTarget], intake: EngineIntake) -> None:
        self.store = store
        self.targets = list(targets)
        self.intake = intake
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: dict[int, str | None] = {}  # target index -> why it fails (None: it works)

    def start(self) -> None:
        if not self.targets or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="taskcost-engine-scrape", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        due = [time.monotonic()] * len(self.targets)
        with httpx.Client(follow_redirects=False) as client:
            while not self._stop.is_set():
                now = time.monotonic()
                for i, target in enumerate(self.targets):
                    if due[i] <= now and not self._stop.is_set():
                        self.scrape_once(client, i)
                        due[i] = max(due[i] + target.interval_s, time.monotonic())
                self._stop.wait(max(0.0, min(due) - time.monotonic()))

    def scrape_once(self, client: httpx.Client, i: int) -> int:
        """Scrape target ``i`` and store what it gave; returns the samples submitted (-1: it failed)."""
        target = self.targets[i]
        try:
            stored = self._scrape(client, target)
        except Exception as exc:  # any failure costs this scrape of this target, nothing else
            self._state(i, target, f"{type(exc).__name__}: {str(exc)[:300]}")
            return -1
        self._state(i, target, None)
        return stored

    def _scrape(self, client: httpx.Client, target: EngineTarget) -> int:
        timeout = min(_MAX_TIMEOUT_S, target.interval_s)
        scraped_ns = time.time_ns()
        response = client.get(target.url, timeout=timeout, headers={"Accept": "text/plain"})
        response.raise_for_status()
        parsed = samples_from_text(
            response.text,
            cluster_id=target.cluster_id,
            engine=target.engine,
            model=target.model,
            scraped_ns=scraped_ns,
        )
        if parsed.rejected and not parsed.samples:
            raise ValueError("; ".join(parsed.messages) or "no sample")
        batch, _ = self.intake.batch(parsed, project=target.project, source="scrape")
        if batch is None:
            return 0
        future: Future[CommitInfo] = self.store.submit(batch, timeout)
        future.result(timeout=_COMMIT_WAIT_S)
        self.intake.stored(batch)
        return batch.sample_count

    def _state(self, i: int, target: EngineTarget, failure: str | None) -> None:
        metrics = self.intake.metrics
        if metrics is not None:
            metrics.engine_scrapes.labels(target.cluster_id, "ok" if failure is None else "failed").inc()
        before = self._failing.get(i)
        self._failing[i] = failure
        if failure is not None and before is None:
            log.warning("engine scrape of %s (cluster %s) fails: %s", target.url, target.cluster_id, failure)
        elif failure is None and before is not None:
            log.info("engine scrape of %s (cluster %s) works again", target.url, target.cluster_id)

    def status(self) -> dict[str, Any]:
        """Each target and whether its last scrape worked."""
        return {
            "targets": [
                {"url": t.url, "cluster_id": t.cluster_id, "failing": self._failing.get(i)}
                for i, t in enumerate(self.targets)
            ]
        }
