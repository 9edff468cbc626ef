"""Queries: every public view and every analytics function / dashboard callback over a store with
1M and 10M synthetic LLM calls, medians of repeated runs.

The history is bulk-loaded in SQL (seeded), then the store rebuilds the writer's duplicate markers and
task roll-up from the rows; it has retries (10% of attempts), duplicate reports of one response (1%) and
unpriced calls (3%). Then 65k spans of agent traffic go in through the real writer, as ingest stores
them: their tasks stay in the task roll-up's delta, just short of the writer's fold threshold, the most
that reads ever merge.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.traffic import requests
from taskcost.analytics import cost_coverage, missing_prices, task_summary
from taskcost.normalize import normalize_request
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, prepare_batch

__all__ = ["QUERIES", "load_history", "load_live", "run_queries"]

_LOAD = """
INSERT INTO llm_call_rows BY NAME
SELECT
    'default' AS project,
    lpad(to_hex(i // 10), 32, '0') AS trace_id,
    lpad(to_hex(i), 16, '0') AS span_id,
    'task-' || (i // 10) AS task_id,
    -- the 10th attempt of a task retries the 9th call
    'call-' || (i // 10) || '-' || least(i % 10, 8) AS call_id,
    CASE WHEN i % 10 = 9 THEN 2 ELSE 1 END AS attempt,
    1796000000000000000 + i * 1000000000 AS start_ns,
    1796000000000000000 + i * 1000000000 + 800000000 AS end_ns,
    'chat' AS operation,
    ['openai', 'anthropic'][1 + (i % 2)] AS provider,
    ['gpt-4o', 'claude-sonnet-4-5', 'gpt-4o-mini', 'claude-haiku-4-5'][1 + (i % 4)] AS request_model,
    ['gpt-4o', 'claude-sonnet-4-5', 'gpt-4o-mini', 'claude-haiku-4-5'][1 + (i % 4)] AS response_model,
    -- 1 in 100: a second report of the previous call's response (same trace), to be counted once
    'resp-' || CASE WHEN i % 100 = 57 THEN i - 1 ELSE i END AS response_id,
    (500 + random() * 20000)::BIGINT AS input_tokens,
    (random() * 400)::BIGINT AS output_tokens,
    (random() * 500)::BIGINT AS cache_read_tokens,
    0 AS cache_write_tokens,
    0 AS reasoning_tokens,
    random() AS ttft_s,
    CASE WHEN random() < 0.05 THEN 'error' ELSE 'ok' END AS status,
    -- with self_hosted, one task in five runs on our own GPUs: two engine versions, two GPU types (for canary,
    -- changes, breakeven)
    CASE WHEN {self_hosted} THEN 'self_hosted' ELSE 'api' END AS deployment,
    CASE WHEN {self_hosted} THEN 'vllm' END AS engine,
    CASE WHEN {self_hosted} THEN ['0.6.0', '0.7.0'][1 + (i // 20) % 2] END AS engine_version,
    CASE WHEN {self_hosted} THEN ['H100', 'A100'][1 + (i // 30) % 2] END AS gpu_type,
    CASE WHEN {self_hosted} THEN 'fp8' END AS quantization,
    CASE WHEN {self_hosted} THEN 'gpu-a' END AS cluster_id,
    'h' || ((i // 30) % 3) AS harness_version,
    -- the SDK's prompt fingerprint: every call after a task's first repeats most of its prompt; 1 in 7 breaks it
    (2000 + (i % 13) * 6000) AS prompt_chars,
    CASE WHEN i % 10 > 0 THEN ((2000 + (i % 13) * 6000) * CASE WHEN i % 7 = 0 THEN 0.2 ELSE 0.9 END)::BIGINT END
        AS stable_prefix_chars,
    CASE WHEN i % 10 > 0 AND i % 7 = 0 THEN 1 END AS prefix_break_block,
    CASE WHEN i % 10 > 0 AND i % 7 = 0 THEN 'system' END AS prefix_break_kind,
    'review-bot' AS service_name,
    CASE WHEN i % 100 < 3 THEN NULL ELSE (random() * 0.05)::DECIMAL(38, 12) END AS cost_usd,
    CASE WHEN i % 100 < 3 THEN NULL ELSE 'synthetic' END AS price_source,
    CASE WHEN i % 100 < 3 THEN 'no price for model' END AS unpriced_reason,
    0 AS received_ns
FROM range({n}) t(i)
"""
_TASKS = """
INSERT INTO task_rows BY NAME
SELECT 'default' AS project, lpad(to_hex(t), 32, '0') AS trace_id, lpad(to_hex(t), 16, '0') AS span_id,
       'task-' || t AS task_id, ['code_review', 'bug_fix', 'report'][1 + t % 3] AS kind, t % 20 = 0 AS golden,
       'h' || ((t // 3) % 3) AS harness_version,
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

_DAY = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))

QUERIES: dict[str, Callable[[Any], Any]] = {
    "analytics.task_summary (CLI tasks, dashboard overview)": task_summary,
    "analytics.cost_coverage, all time": cost_coverage,
    "analytics.cost_coverage, one day": lambda s: cost_coverage(s, *_DAY),
    "analytics.missing_prices (CLI prices missing)": missing_prices,
    "tasks: 50 costliest": lambda s: s.query("SELECT * FROM tasks ORDER BY cost_usd DESC NULLS LAST LIMIT 50"),
    "tasks: one task": lambda s: s.query("SELECT * FROM tasks WHERE task_id = 'task-4242'"),
    "llm_calls: one call by span id (explain-cost)": lambda s: s.query(
        "SELECT * FROM llm_calls WHERE span_id = ?", [f"{424242:016x}"]
    ),
    "tool_calls: spend by tool": lambda s: s.query("SELECT tool_name, sum(cost_usd) FROM tool_calls GROUP BY 1"),
    "ad-hoc SQL over the row-level llm_calls view: cost and cache hits by model": lambda s: s.query(
        "SELECT model, sum(cost_usd), sum(cache_read_tokens) / sum(input_tokens) FROM llm_calls GROUP BY model"
    ),
}


def load_history(store: DuckDBStore, calls: int, self_hosted: bool = False, then: Sequence[str] = ()) -> None:
    """``calls`` stored LLM calls (and their tasks and tools), bulk-loaded behind the writer, roll-ups rebuilt.
    ``self_hosted``: one task in five runs on our own GPUs (engines, versions, GPU types: what the analytics
    questions compare); without it every call is an API call, as the query and re-price figures were measured.
    ``then``: more loads (SQL) before the roll-ups are rebuilt."""
    store.admin_query("SELECT setseed(0.42)")
    store.admin_query(_LOAD.format(n=calls, self_hosted="(i // 10) % 5 = 0" if self_hosted else "FALSE"))
    store.admin_query(_TASKS.format(n=calls // 10))
    store.admin_query(_TOOLS.format(n=calls // 30))
    for sql in then:
        store.admin_query(sql)
    store.rebuild_rollups()  # the rows went in behind the writer: decide its markers and roll-ups from them
    store.admin_query("CHECKPOINT")


def load_live(store: DuckDBStore, spans: int = 65_000) -> None:
    """Live traffic through the writer (its task ids overlap the history's: tasks still running get more calls),
    leaving task roll-up deltas for the views to merge, as under ingest."""
    futures = [store.submit(prepare_batch(normalize_request(r), 1)) for r in requests(spans, seed=3)]
    for f in futures:
        f.result(600)


SERVER_MEMORY_LIMIT: str | None = None  # None: the server's default on this machine (Settings.server_memory_limit)
LIVE_SPANS = 65_000
LIVE = "_live_spans_per_s"  # (not a query) spans/s of the live traffic through the writer into the loaded store


def run_queries(sizes: tuple[int, ...] = (1_000_000, 10_000_000), repeats: int = 5) -> dict[tuple[str, int], float]:
    """Median seconds per (query, size); and under (``LIVE``, size) the spans/s of the live traffic committed
    into the store of that size (through the writer, under the server's memory limit)."""
    out: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            db = Path(tmp) / f"q{size}.duckdb"
            t = time.perf_counter()
            with DuckDBStore.open(db) as store:  # a bulk load needs more than the server's memory limit
                load_history(store, size)
            # then as the server holds the file: live traffic and queries under its DuckDB memory limit
            with DuckDBStore.open(
                db,
                max_queued_spans=10**9,
                memory_limit=SERVER_MEMORY_LIMIT or Settings().server_memory_limit(),
                threads=Settings().server_duckdb_threads(),  # the server's default on this machine
            ) as store:
                live = time.perf_counter()
                load_live(store, LIVE_SPANS)
                live = time.perf_counter() - live
                out[(LIVE, size)] = LIVE_SPANS / live
                delta = store.admin_query("SELECT count(*) FROM task_rollup_delta").rows[0][0]
                took = time.perf_counter() - t
                print(
                    f"  loaded {size:,} calls in {took:.1f} s ({delta:,} task rows to fold); live commits "
                    f"{LIVE_SPANS / live:,.0f} spans/s",
                    flush=True,
                )
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
