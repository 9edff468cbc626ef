"""Migration: inference engines' own metrics, stored as samples (``_migrations`` lists every migration).

``engine_metric_rows`` holds every sample as it came (a Prometheus scrape by the server, or OTLP metrics from an
OpenTelemetry Collector); the public view ``engine_metrics`` shows each sample once: a re-sent one (same project,
cluster, engine, model, metric, labels and time) is left out at read time, the first received kept (the ClickHouse
store's view has the same rule). docs/schema.md documents the columns and the canonical names.
"""

from __future__ import annotations

__all__ = ["ENGINE_METRICS"]

ENGINE_METRICS = """
CREATE TABLE engine_metric_rows (
    project VARCHAR NOT NULL DEFAULT 'default',
    cluster_id VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,
    model VARCHAR,
    metric VARCHAR NOT NULL,
    source_metric VARCHAR NOT NULL,
    labels JSON NOT NULL,
    kind VARCHAR NOT NULL,
    ts_ns BIGINT NOT NULL,
    value DOUBLE NOT NULL,
    source VARCHAR NOT NULL,
    received_ns BIGINT NOT NULL
);
CREATE VIEW engine_metrics AS
SELECT project, cluster_id, engine, model, metric, source_metric, labels, kind, ts_ns, value, source, received_ns
FROM engine_metric_rows
QUALIFY row_number() OVER (
    PARTITION BY project, cluster_id, engine, model, metric, labels, ts_ns ORDER BY received_ns, source_metric
) = 1;
"""
