"""A re-price reads and writes page by page: its memory does not grow with the history it re-prices.

The store holds as many calls (with their spans) as the old design needed more than DuckDB's memory limit for (it
snapshotted every call's inputs into one temporary table, joined to their spans, and ran out of memory at 300k calls
under the server's default 128MB); here a smaller history under a proportionally smaller limit."""

from __future__ import annotations

import time
from pathlib import Path

from bench.query import load_history
from bench.reprice import run_reprice
from taskcost.pricing import default_pricer
from taskcost.store import DuckDBStore

CALLS = 60_000
LIMIT = "48MB"

_SPANS = """
INSERT INTO spans BY NAME
SELECT project, trace_id, span_id, 'chat ' || request_model AS name, 3 AS kind, start_ns, end_ns, 0 AS status_code,
    service_name, ('{"gen_ai.operation.name": "chat", "gen_ai.request.model": "' || request_model
        || '", "taskcost.task.id": "' || task_id || '", "note": "' || repeat('n', 250) || '"}')::JSON AS attributes,
    '{"service.name": "review-bot"}'::JSON AS resource_attributes, '[]'::JSON AS events, received_ns
FROM llm_call_rows
"""


def test_a_reprice_of_a_history_larger_than_memory_completes_and_is_exact(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    with DuckDBStore.open(db) as store:
        load_history(store, CALLS)  # synthetic costs: every priced call gets a new one
        store.admin_query(_SPANS)
        store.admin_query("CHECKPOINT")
    with DuckDBStore.open(db, memory_limit=LIMIT, threads=1) as store:
        report = store.reprice(default_pricer(), now_ns=time.time_ns(), page=2000)
        assert report.calls == CALLS and report.changed > CALLS * 0.9
        # every call now carries the new prices, and every task is the sum of its calls
        stale = store.admin_query("SELECT count(*) FROM llm_call_rows WHERE price_source = 'synthetic'").rows
        assert stale == [(0,)]
        mismatched = store.admin_query(
            "SELECT count(*) FROM tasks t JOIN (SELECT project, task_id, sum(cost_usd) AS s FROM llm_calls "
            "GROUP BY ALL) c USING (project, task_id) WHERE t.llm_cost_usd IS DISTINCT FROM c.s"
        ).rows
        assert mismatched == [(0,)]


def test_the_bench_reprice_runs_and_the_writer_folds_its_task_cost_changes_in() -> None:
    # the bench's load and run are code in strings, which nothing else would notice rotting
    (run,) = run_reprice((3_000,))
    assert run.calls == 3_000 and run.changed > 2_700
    assert run.seconds > 0 and run.peak_rss_mb > 20 and run.memory_limit
    assert run.delta_left == 0  # the re-price's cost changes are in the task roll-up, not left for ingest to fold
