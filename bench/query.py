"""Queries: every public view and every analytics function / dashboard callback over a store with
1M and 10M synthetic LLM calls (bulk-loaded in SQL, seeded), medians of repeated runs."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskcost.analytics import task_summary
from taskcost.store import DuckDBStore

__all__ = ["QUERIES", "load_synthetic", "run_queries"]

_LOAD = """
INSERT INTO llm_call_rows BY NAME
SELECT
    'default' AS project,
    lpad(to_hex(i // 10), 32, '0') AS trace_id,
    lpad(to_hex(i), 16, '0') AS span_id,
    'task-' || (i // 10) AS task_id,
    'call-' || (i // 10) || '-' || (i % 10) AS call_id,
    CASE WHEN random() < 0.1 THEN 2 ELSE 1 END AS attempt,
    1796000000000000000 + i * 1000000000 AS start_ns,
    1796000000000000000 + i * 1000000000 + 800000000 AS end_ns,
    'chat' AS operation,
    ['openai', 'anthropic'][1 + (i % 2)] AS provider,
    ['gpt-4o', 'claude-sonnet-4-5', 'gpt-4o-mini', 'claude-haiku-4-5'][1 + (i % 4)] AS request_model,
    ['gpt-4o', 'claude-sonnet-4-5', 'gpt-4o-mini', 'claude-haiku-4-5'][1 + (i % 4)] AS response_model,
    'resp-' || i AS response_id,
    (500 + random() * 20000)::BIGINT AS input_tokens,
    (random() * 400)::BIGINT AS output_tokens,
    (random() * 500)::BIGINT AS cache_read_tokens,
    0 AS cache_write_tokens,
    0 AS reasoning_tokens,
    random() AS ttft_s,
    CASE WHEN random() < 0.05 THEN 'error' ELSE 'ok' END AS status,
    'api' AS deployment,
    'review-bot' AS service_name,
    (random() * 0.05)::DECIMAL(38, 12) AS cost_usd,
    'synthetic' AS price_source,
    0 AS received_ns
FROM range({n}) t(i)
"""
_TASKS = """
INSERT INTO task_rows BY NAME
SELECT 'default' AS project, lpad(to_hex(t), 32, '0') AS trace_id, lpad(to_hex(t), 16, '0') AS span_id,
       'task-' || t AS task_id, 'code_review' AS kind,
       CASE WHEN random() < 0.85 THEN 'completed' ELSE 'failed' END AS outcome,
       1796000000000000000 + t * 10000000000 AS start_ns, 1796000000000000000 + t * 10000000000 + 9000000000 AS end_ns,
       'ok' AS status, 0 AS received_ns
FROM range({n}) r(t)
"""
_TOOLS = """
INSERT INTO tool_call_rows BY NAME
SELECT 'default' AS project, lpad(to_hex(t), 32, '0') AS trace_id, lpad(to_hex(t + 7), 16, '0') AS span_id,
       'task-' || t AS task_id, 'web_search' AS tool_name, 0 AS start_ns, 1 AS end_ns, 'ok' AS status,
       0.005::DECIMAL(38, 12) AS cost_usd, 0 AS received_ns
FROM range({n}) r(t)
"""

QUERIES: dict[str, Callable[[Any], Any]] = {
    "llm_calls: cost by model": lambda s: s.query(
        "SELECT model, sum(cost_usd), sum(cache_read_tokens) / sum(input_tokens) FROM llm_calls GROUP BY model"
    ),
    "tool_calls: spend by tool": lambda s: s.query("SELECT tool_name, sum(cost_usd) FROM tool_calls GROUP BY 1"),
    "tasks: 50 costliest": lambda s: s.query("SELECT * FROM tasks ORDER BY cost_usd DESC NULLS LAST LIMIT 50"),
    "analytics.task_summary (CLI tasks, dashboard overview)": task_summary,
}


def load_synthetic(store: DuckDBStore, calls: int) -> None:
    store.admin_query("SELECT setseed(0.42)")
    store.admin_query(_LOAD.format(n=calls))
    store.admin_query(_TASKS.format(n=calls // 10))
    store.admin_query(_TOOLS.format(n=calls // 30))
    store.admin_query("CHECKPOINT")


def run_queries(sizes: tuple[int, ...] = (1_000_000, 10_000_000), repeats: int = 5) -> dict[tuple[str, int], float]:
    """Median seconds per (query, size)."""
    out: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            db = Path(tmp) / f"q{size}.duckdb"
            with DuckDBStore.open(db) as store:
                t = time.perf_counter()
                load_synthetic(store, size)
                print(f"  loaded {size:,} calls in {time.perf_counter() - t:.1f} s", flush=True)
                for name, fn in QUERIES.items():
                    fn(store)  # warm
                    times = []
                    for _ in range(repeats):
                        t = time.perf_counter()
                        fn(store)
                        times.append(time.perf_counter() - t)
                    out[(name, size)] = statistics.median(times)
            db.unlink(missing_ok=True)
    return out
