"""Prometheus metrics, in a registry of the app's own (no global state)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from taskcost.store import CommitInfo, Store

__all__ = ["Metrics"]


class Metrics:
    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.received = Counter("taskcost_spans_received", "Spans received in well-formed requests", registry=r)
        self.accepted = Counter("taskcost_spans_accepted", "Spans committed to the store (new)", registry=r)
        self.deduplicated = Counter(
            "taskcost_spans_deduplicated", "Spans re-sent and skipped (already stored)", registry=r
        )
        self.rejected = Counter(
            "taskcost_spans_rejected", "Spans rejected as invalid (partial success)", ["reason"], registry=r
        )
        self.refused = Counter(
            "taskcost_requests_refused",
            "Requests answered 503 (queue full, too many in flight, store failure): nothing kept, client retries",
            ["reason"],
            registry=r,
        )
        self.throttled = Counter(
            "taskcost_requests_throttled",
            "Requests that had to wait for a decoding slot or for room in the write queue",
            ["reason"],
            registry=r,
        )
        self.ignored_values = Counter(
            "taskcost_attribute_values_ignored",
            "Attribute values read as absent (not a number, out of range); their spans are stored as sent",
            registry=r,
        )
        self.dropped = Counter(
            "taskcost_spans_dropped", "Spans acknowledged but not stored (always 0: ack follows commit)", registry=r
        )
        self.limited = Counter(
            "taskcost_otlp_limited",
            "What the OTLP intake limits cut (docs/security.md, Intake): attributes and span events dropped and "
            "attribute values truncated (their spans stored), requests refused as too large once decoded (413)",
            ["what"],
            registry=r,
        )
        self.bad_requests = Counter("taskcost_requests_invalid", "Requests refused with a 4xx", ["status"], registry=r)
        self.write_seconds = Histogram(
            "taskcost_write_seconds",
            "Duration of one commit of the single writer",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        queue = Gauge("taskcost_write_queue_spans", "Spans accepted and waiting for the writer", registry=r)
        queue.set_function(lambda: float(store.queued_spans))
        limit = Gauge(
            "taskcost_write_queue_limit_spans",
            "Spans the write queue takes at most now (max_queued_spans, or max_queued_s of the commit rate)",
            registry=r,
        )
        limit.set_function(lambda: float(store.queue_limit))
        self.dropped.inc(0)
        Info("taskcost_store", "The store engine's limits in this process", registry=r).info(store.engine_settings)
        self.sql_refused = Counter(
            "taskcost_sql_refused", "SQL queries answered 429: every query slot and queue place taken", registry=r
        )

        self.engine_samples = Counter(
            "taskcost_engine_samples",
            "Engine metric samples (a scrape or OTLP metrics) by what became of them: stored; rejected (not a "
            "sample: no number, not finite, a negative counter...); over_series_cap (dropped: the project has "
            "engine_max_series series); ignored (a name taskcost does not map)",
            ["outcome"],
            registry=r,
        )
        self.engine_scrapes = Counter(
            "taskcost_engine_scrapes",
            "Scrapes of the engine_scrape targets, by cluster and outcome (ok, failed)",
            ["cluster_id", "outcome"],
            registry=r,
        )
        self.engine_series: Any = None  # the engine series cap the receivers share (``EngineIntake.of``)

    def on_limits(self, cut: tuple[int, int, int]) -> None:
        """Count what the intake limits cut in one request: (attributes dropped, events dropped, values truncated)."""
        for what, n in zip(("attributes_dropped", "events_dropped", "values_truncated"), cut, strict=True):
            if n:
                self.limited.labels(what).inc(n)

    def on_commit(self, info: CommitInfo) -> None:
        self.accepted.inc(info.spans)
        self.deduplicated.inc(info.deduplicated)
        self.write_seconds.observe(info.seconds)
